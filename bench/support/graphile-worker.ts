import { performance } from 'node:perf_hooks';
import { Pool, type Client } from 'pg';
import { sleep, walBytesSince, walPosition } from './database';

/** graphile-worker's own settings for the comparison: its local queue and batched completion. */
const CONCURRENCY = 20;
const LOCAL_QUEUE_SIZE = 500;
const ADD_BATCH = 1000;

/** graphile-worker 0.18 needs Node 22.18 or later. */
export function graphileWorkerRuns(): boolean {
  const [major, minor] = process.versions.node.split('.').map(Number);
  return major > 22 || (major === 22 && minor >= 18);
}

/**
 * graphile-worker's burn-down on the same database: `events` no-op jobs added first, then a
 * worker (concurrency 20, `localQueue` of 500, completions batched) from its start until its
 * jobs table is empty, in events/s.
 */
export async function graphileWorkerBurnDown(
  url: string,
  sql: Client,
  events: number,
): Promise<{ events: number; rate: number; walBytes: number }> {
  const { Logger, makeWorkerUtils, run } = await import('graphile-worker');
  const silent = new Logger(() => () => undefined);
  // A pool of the bench's own, ended (and listened to) here: one graphile-worker ends by itself
  // could still be closing a connection when the scenario's database is dropped, and the
  // backend's termination would reach a client with no error listener and stop the bench.
  const pgPool = new Pool({ connectionString: url, max: CONCURRENCY + 4 });
  pgPool.on('error', () => undefined);
  try {
    return await burnDown(pgPool);
  } finally {
    await pgPool.end();
  }

  async function burnDown(pgPool: Pool) {
    const utils = await makeWorkerUtils({ pgPool, logger: silent });
    try {
      await utils.migrate();
      for (let first = 0; first < events; first += ADD_BATCH) {
        const size = Math.min(ADD_BATCH, events - first);
        await utils.addJobs(
          Array.from({ length: size }, (_, k) => ({
            identifier: 'noop',
            payload: { i: first + k },
          })),
        );
      }
    } finally {
      await utils.release();
    }
    await sql.query('VACUUM ANALYZE graphile_worker._private_jobs');
    const wal = await walPosition(sql);
    const started = performance.now();
    const runner = await run({
      pgPool,
      concurrency: CONCURRENCY,
      noHandleSignals: true,
      pollInterval: 1000,
      logger: silent,
      taskList: { noop: () => Promise.resolve() },
      preset: {
        worker: {
          localQueue: { size: LOCAL_QUEUE_SIZE },
          completeJobBatchDelay: 0,
          failJobBatchDelay: 0,
        },
      },
    });
    try {
      const deadline = started + 120_000;
      for (;;) {
        const { rows } = await sql.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM graphile_worker._private_jobs',
        );
        if (rows[0].n === 0) break;
        if (performance.now() > deadline) throw new Error(`${rows[0].n} jobs left after 120 s`);
        await sleep(10);
      }
      const rate = events / ((performance.now() - started) / 1000);
      return { events, rate, walBytes: await walBytesSince(sql, wal) };
    } finally {
      await runner.stop();
    }
  }
}
