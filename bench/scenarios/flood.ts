import { quietServer, withFreshDatabase } from '../support/database';
import { floodRun, type FloodRun } from '../support/flood';
import { formatLatency } from '../support/percentiles';
import { count, ms, note, times, type Figure } from '../support/report';
import type { Scenario } from './scenario';

/** The handler time of the slow run, whose slots bound the flood's rate. */
const SLOW_HANDLER_MS = 20;

const RUNS = [
  { handler: 'noop', flood: 20_000, label: 'no-op handler, 20,000 flood events' },
  { handler: 'slow-20ms', flood: 20_000, label: '20 ms handler, 20,000 flood events' },
  { handler: 'noop', flood: 200_000, label: 'no-op handler, 200,000 flood events' },
] as const;

/**
 * One tenant's flood: partition A emits a backlog in transactions of 500 while partitions B–K
 * go on at 10 events/s each, with fair claims (the default) and without. Their commit → handler
 * latency before and during the flood, and the flood's own rate: beside the same flood without
 * fair claims, and beside the slot bound (concurrency ÷ handler time) for the slow handler.
 */
export const flood: Scenario = {
  name: 'flood',
  title: 'one partition floods, ten others go on at 10 events/s each, fair claims on and off',
  run: (server) =>
    withFreshDatabase(server, 'flood', async (db) => {
      const figures: Figure[] = [];
      for (const { handler, flood: events, label } of RUNS) {
        const runs: FloodRun[] = [];
        for (const enabled of [true, false]) {
          await db.sql.query('TRUNCATE outbox_event');
          await quietServer(db.sql);
          const run = await floodRun(db.url, handler, events, { fairness: { enabled } });
          const name = `${label}, fair claims ${enabled ? 'on' : 'off'}`;
          note(`${name}: B–K before ${formatLatency(run.before)}`);
          note(`${name}: B–K during ${formatLatency(run.during)}`);
          note(
            `${name}: flood ${count(run.floodRate)} events/s over ${run.slots} slots, emitted at ` +
              `${count(run.emitRate)} events/s, largest backlog ${count(run.largestBacklog)}`,
          );
          runs.push(run);
        }
        figures.push(...describe(label, runs[0], runs[1], handler === 'slow-20ms'));
      }
      return figures;
    }),
};

function latency(run: FloodRun): string {
  return (
    `${ms(run.before.p50)} / ${ms(run.before.p99)} → ` +
    `${ms(run.during.p50)} / ${ms(run.during.p99)}`
  );
}

function describe(label: string, fair: FloodRun, unfair: FloodRun, slow: boolean): Figure[] {
  const bound = 2 * fair.before.p99 + 50;
  const figures: Figure[] = [
    {
      figure: `${label}: B–K p50 / p99 before → during the flood, fair claims`,
      value: `${latency(fair)} (p99 ${times(fair.during.p99 / fair.before.p99)})`,
      target: `p99 ≤ ${ms(bound)} (2 × before + 50 ms)`,
    },
    {
      figure: `${label}: the same without fair claims`,
      value: `${latency(unfair)} (p99 ${times(unfair.during.p99 / unfair.before.p99)})`,
      target: 'report',
    },
    {
      figure: `${label}: flood rate, fair claims vs without`,
      value: `${count(fair.floodRate)} vs ${count(unfair.floodRate)} events/s = ${times(fair.floodRate / unfair.floodRate)}`,
      target: '≥ 0.9 ×',
    },
  ];
  if (slow) {
    const slotBound = fair.slots / (SLOW_HANDLER_MS / 1000);
    figures.push({
      figure: `${label}: flood rate with fair claims vs slot bound (${fair.slots} ÷ ${SLOW_HANDLER_MS} ms)`,
      value: `${count(fair.floodRate)} vs ${count(slotBound)} events/s = ${times(fair.floodRate / slotBound)}`,
      target: '≥ 0.85 ×',
    });
  }
  return figures;
}
