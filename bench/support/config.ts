import type { OutboxModuleOptions } from '../../libs/outbox/src';

/**
 * The knobs of `npm run bench`, all from the environment:
 *
 *   BENCH_ONLY             comma-separated scenario names (see `bench/scenarios/index.ts`);
 *                          all when unset. `scrub` selects the scrubError benchmark.
 *   BENCH_EVENTS           events of the `burndown`, `mixed` and `ordered-burndown` backlogs
 *                          (20000); `producer`, `cpu`, the small `rss` backlog and
 *                          `settle-kill` take half of it.
 *   BENCH_LATENCY_SECONDS  length of each 100 events/s latency run (10).
 *   BENCH_HELD_XMIN_EVENTS events of each `held-xmin` burn-down (100000).
 *   BENCH_BACKLOG_ROWS     rows of the large backlogs of `health` and `rss` (1000000).
 *   BENCH_BACKOFF_ROWS     rows resting in backoff in `claim-backoff` (200000).
 *   BENCH_OUTBOX_OPTIONS   JSON module options under test, e.g. '{"concurrency":20}'; the
 *                          options a scenario needs for what it measures come on top.
 *   BENCH_MIXED_CAP_SECONDS  longest `mixed` burn-down; past it the rate is taken over what
 *                          was delivered so far (45).
 *   BENCH_RSS_SECONDS      how long the relay delivers against each backlog in `rss` (10).
 *   BENCH_PRODUCER_SECONDS seconds of emits, and as many of bare INSERTs, per condition of
 *                          `producers` (5).
 *   BENCH_STORM_SECONDS    seconds of each producer storm in `storm` (10).
 */
function numberFromEnv(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text.trim() === '') return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) {
    throw new Error(`${name} must be a positive number, got ${JSON.stringify(text)}`);
  }
  return value;
}

export const EVENTS = Math.round(numberFromEnv('BENCH_EVENTS', 20_000));
export const LATENCY_SECONDS = numberFromEnv('BENCH_LATENCY_SECONDS', 10);
export const HELD_XMIN_EVENTS = Math.round(numberFromEnv('BENCH_HELD_XMIN_EVENTS', 100_000));
export const BACKLOG_ROWS = Math.round(numberFromEnv('BENCH_BACKLOG_ROWS', 1_000_000));
export const BACKOFF_ROWS = Math.round(numberFromEnv('BENCH_BACKOFF_ROWS', 200_000));
export const MIXED_CAP_SECONDS = numberFromEnv('BENCH_MIXED_CAP_SECONDS', 45);
export const RSS_SECONDS = numberFromEnv('BENCH_RSS_SECONDS', 10);
export const PRODUCER_SECONDS = Math.max(1, Math.round(numberFromEnv('BENCH_PRODUCER_SECONDS', 5)));
export const STORM_SECONDS = numberFromEnv('BENCH_STORM_SECONDS', 10);
export const OUTBOX_OPTIONS = JSON.parse(
  process.env.BENCH_OUTBOX_OPTIONS ?? '{}',
) as OutboxModuleOptions;

/** Events per second of the latency runs. */
export const RATE_PER_SECOND = 100;

/** Scenario names picked by BENCH_ONLY, or undefined for all. */
export function selectedNames(): Set<string> | undefined {
  const text = process.env.BENCH_ONLY?.trim();
  if (!text) return undefined;
  return new Set(
    text
      .split(',')
      .map((name) => name.trim())
      .filter(Boolean),
  );
}
