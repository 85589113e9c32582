import { performance } from 'node:perf_hooks';
import type { Client } from 'pg';
import { countDelivered, insertEvents, sleep, withFreshDatabase } from '../support/database';
import { MAX_CONCURRENT, RATE_LIMIT, type HandlerKind } from '../support/handlers';
import { RelayProcess } from '../support/relay-process';
import type { RunSpan } from '../support/relay-ipc';
import { count, describeError, note, times, type Figure } from '../support/report';
import type { Scenario } from './scenario';

const PROCESSES = 3;
const RATE_EVENTS = 100;
const CONCURRENT_EVENTS = 150;
const DEADLINE_MS = 120_000;
/** Each process's slots: many more than the limit lets run, as on pods sized for other work. */
const CONCURRENCY = 20;

/**
 * Every admission of a rate, by the limit's own clock (read under its row lock): a trigger logs
 * the start each admission appends.
 */
const ADMISSION_LOG = `
  CREATE TABLE bench_admission (at timestamptz NOT NULL);
  CREATE FUNCTION bench_log_admission() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF cardinality(NEW.starts) > 0 AND (cardinality(OLD.starts) = 0
        OR NEW.starts[cardinality(NEW.starts)] > OLD.starts[cardinality(OLD.starts)]) THEN
      INSERT INTO bench_admission (at) VALUES (NEW.starts[cardinality(NEW.starts)]);
    END IF;
    RETURN NEW;
  END $$;
  CREATE TRIGGER bench_log_admission AFTER UPDATE ON outbox_handler_limit
    FOR EACH ROW EXECUTE FUNCTION bench_log_admission();`;

interface LimitedRun {
  spans: RunSpan[];
  delivered: number;
  reruns: number;
  held: number;
  tookMs: number;
  crashed?: string;
}

/** `events` events burnt down by three processes whose one handler is `handler`. */
async function runAcrossProcesses(
  sql: Client,
  url: string,
  handler: HandlerKind,
  events: number,
): Promise<LimitedRun> {
  await insertEvents(sql, events);
  const relays = await Promise.all(
    Array.from({ length: PROCESSES }, (_, i) =>
      RelayProcess.spawn({
        url,
        mode: 'module',
        handler,
        applicationName: `bench-limited-${i}`,
        outbox: { concurrency: CONCURRENCY },
        progressEvery: events,
      }),
    ),
  );
  const started = performance.now();
  let delivered = 0;
  let crashed: string | undefined;
  try {
    await Promise.all(relays.map((relay) => relay.start()));
    while (delivered < events && performance.now() - started < DEADLINE_MS) {
      if (relays.some((relay) => relay.exit)) break;
      await sleep(50);
      delivered = await countDelivered(sql);
    }
  } catch (error) {
    crashed = describeError(error);
  }
  const tookMs = performance.now() - started;
  const crashedRelay = relays.find((relay) => relay.exit);
  if (crashedRelay) crashed ??= `relay exited (${JSON.stringify(crashedRelay.exit)})`;
  const spans = crashed ? [] : (await Promise.all(relays.map((r) => r.spans()))).flat();
  const runs = crashed ? [] : await Promise.all(relays.map((r) => r.runs()));
  await Promise.all(relays.map((relay) => relay.close()));
  const { rows } = await sql.query<{ held: string }>(
    'SELECT coalesce(sum(held), 0) AS held FROM outbox_handler_limit',
  );
  // Every delivered event ran at least once: any run beyond that is one run twice.
  const runsInAll = runs.reduce((sum, r) => sum + r.runs, 0);
  return {
    spans,
    delivered,
    reruns: crashed ? 0 : runsInAll - delivered,
    held: Number(rows[0].held),
    tookMs,
    crashed,
  };
}

/** Most of `times` (sorted, ms) within any window of `windowMs`. */
function mostInWindow(times: readonly number[], windowMs: number): number {
  let most = 0;
  let first = 0;
  for (let last = 0; last < times.length; last++) {
    while (times[last] - times[first] >= windowMs) first++;
    most = Math.max(most, last - first + 1);
  }
  return most;
}

/** The shortest time `n` consecutive `times` (sorted, ms) span. */
function shortestSpan(times: readonly number[], n: number): number {
  let shortest = Infinity;
  for (let i = 0; i + n - 1 < times.length; i++) {
    shortest = Math.min(shortest, times[i + n - 1] - times[i]);
  }
  return shortest;
}

/** Most runs in flight at one instant. */
function mostInFlight(spans: readonly RunSpan[]): number {
  const edges = spans.flatMap((s) => [
    { at: s.start, delta: 1 },
    { at: s.end, delta: -1 },
  ]);
  edges.sort((a, b) => a.at - b.at || a.delta - b.delta);
  let now = 0;
  let most = 0;
  for (const edge of edges) most = Math.max(most, (now += edge.delta));
  return most;
}

function lossLine(run: LimitedRun, events: number): string {
  return (
    `${count(run.delivered)} of ${count(events)} delivered, ${count(events - run.delivered)} lost, ` +
    `${count(run.reruns)} run twice; ${(run.held / events).toFixed(1)} runs held per event`
  );
}

/**
 * A handler's limits held across three processes, each with 20 slots: a rate of 10 a second (a
 * partner's API) over 100 events, and 5 at once (100 ms calls) over 150. Counted: the most
 * admissions and handler starts in any 1 s window, the most runs in flight, the rate reached
 * against the limit, runs held back per event, and 0 lost.
 */
export const limits: Scenario = {
  name: 'limits',
  title: `handler limits across ${PROCESSES} processes: ${RATE_LIMIT.limit} a second, ${MAX_CONCURRENT} at once`,
  run: async (server) => {
    const figures: Figure[] = [];
    await withFreshDatabase(server, 'limits_rate', async (db) => {
      await db.sql.query(ADMISSION_LOG);
      const run = await runAcrossProcesses(db.sql, db.url, 'rate-limited', RATE_EVENTS);
      const { rows } = await db.sql.query<{ ms: number }>(
        'SELECT extract(epoch FROM at) * 1000 AS ms FROM bench_admission ORDER BY at',
      );
      const admitted = rows.map((row) => Number(row.ms));
      const starts = run.spans.map((s) => s.start).sort((a, b) => a - b);
      // The first window's burst aside (the first `limit` starts at once), the limit's pace:
      // the starts from the one after the burst to the last, over the time between them.
      const after = starts.slice(RATE_LIMIT.limit);
      const paced = (after.length - 1) / ((after.at(-1)! - after[0]) / 1000);
      note(`rate: ${lossLine(run, RATE_EVENTS)}; took ${(run.tookMs / 1000).toFixed(1)} s`);
      if (run.crashed) note(run.crashed);
      figures.push(
        {
          figure: `rate ${RATE_LIMIT.limit}/s across ${PROCESSES} processes: most admissions in any 1 s (database clock)`,
          value: `${mostInWindow(admitted, RATE_LIMIT.perMs)} (${count(admitted.length)} admitted)`,
          target: `≤ ${RATE_LIMIT.limit}`,
        },
        {
          figure: '… most handler starts in any 1 s (the processes’ clock)',
          value:
            `${mostInWindow(starts, RATE_LIMIT.perMs)}; the shortest span of ` +
            `${RATE_LIMIT.limit + 1} starts ${shortestSpan(starts, RATE_LIMIT.limit + 1).toFixed(0)} ms, ` +
            `of admissions ${shortestSpan(admitted, RATE_LIMIT.limit + 1).toFixed(0)} ms`,
          target: `≤ ${RATE_LIMIT.limit}`,
        },
        {
          figure: '… starts per second after the first burst, vs the limit',
          value: `${paced.toFixed(1)}/s = ${times(paced / RATE_LIMIT.limit)}`,
          target: 'report',
        },
        { figure: '… lost, run twice, held', value: lossLine(run, RATE_EVENTS), target: '0 lost' },
      );
    });
    await withFreshDatabase(server, 'limits_concurrent', async (db) => {
      const run = await runAcrossProcesses(
        db.sql,
        db.url,
        'concurrency-limited',
        CONCURRENT_EVENTS,
      );
      const bound = (MAX_CONCURRENT * 1000) / 100;
      const rate = run.delivered / (run.tookMs / 1000);
      note(
        `at once: ${lossLine(run, CONCURRENT_EVENTS)}; took ${(run.tookMs / 1000).toFixed(1)} s`,
      );
      if (run.crashed) note(run.crashed);
      figures.push(
        {
          figure: `${MAX_CONCURRENT} at once across ${PROCESSES} processes, 100 ms calls: most in flight`,
          value: `${mostInFlight(run.spans)}`,
          target: `≤ ${MAX_CONCURRENT}`,
        },
        {
          figure: '… events/s vs the bound (5 ÷ 100 ms)',
          value: `${rate.toFixed(1)}/s = ${times(rate / bound)}`,
          target: 'report',
        },
        {
          figure: '… lost, run twice, held',
          value: lossLine(run, CONCURRENT_EVENTS),
          target: '0 lost',
        },
      );
    });
    return figures;
  },
};
