import { withFreshDatabase } from '../support/database';
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
 * go on at 10 events/s each. Their commit → handler latency before and during the flood, and
 * the flood's own rate (beside the slot bound, concurrency ÷ handler time, for the slow
 * handler).
 */
export const flood: Scenario = {
  name: 'flood',
  title: 'one partition floods, ten others go on at 10 events/s each',
  run: (server) =>
    withFreshDatabase(server, 'flood', async (db) => {
      const figures: Figure[] = [];
      for (const { handler, flood: events, label } of RUNS) {
        await db.sql.query('TRUNCATE outbox_event');
        const run = await floodRun(db.url, handler, events);
        note(`${label}: B–K before ${formatLatency(run.before)}`);
        note(`${label}: B–K during ${formatLatency(run.during)}`);
        note(`${label}: flood ${count(run.floodRate)} events/s over ${run.slots} slots`);
        figures.push(...describe(label, run, handler === 'slow-20ms'));
      }
      return figures;
    }),
};

function describe(label: string, run: FloodRun, slow: boolean): Figure[] {
  const bound = 2 * run.before.p99 + 50;
  const figures: Figure[] = [
    {
      figure: `${label}: B–K p50 / p99 before → during the flood`,
      value:
        `${ms(run.before.p50)} / ${ms(run.before.p99)} → ` +
        `${ms(run.during.p50)} / ${ms(run.during.p99)} (p99 ${times(run.during.p99 / run.before.p99)})`,
      target: `p99 ≤ ${ms(bound)} (2 × before + 50 ms)`,
    },
  ];
  if (slow) {
    const slotBound = run.slots / (SLOW_HANDLER_MS / 1000);
    figures.push({
      figure: `${label}: flood rate vs slot bound (${run.slots} ÷ ${SLOW_HANDLER_MS} ms)`,
      value: `${count(run.floodRate)} vs ${count(slotBound)} events/s = ${times(run.floodRate / slotBound)}`,
      target: '≥ 0.85 ×',
    });
  } else {
    figures.push({
      figure: `${label}: flood rate`,
      value: `${count(run.floodRate)} events/s`,
      target: 'report',
    });
  }
  return figures;
}
