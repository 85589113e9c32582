import { performance } from 'node:perf_hooks';
import type { Client } from 'pg';
import { DataSource } from 'typeorm';
import { OUTBOX_ENTITIES, OutboxLeaseStore } from '../../libs/outbox/src';
import { BACKLOG_ROWS } from '../support/config';
import { insertEvents, withFreshDatabase } from '../support/database';
import { median } from '../support/percentiles';
import { count, describeError, ms, note, times } from '../support/report';
import type { Scenario } from './scenario';

const SMALL = 100;
const CALLS = 50;
const DEAD_RETRY_MS = 21_600_000;
/** One row in 20 rests in backoff, the rest are due. */
const MIX = {
  nextAttemptAt: `CASE WHEN g % 20 = 0 THEN now() + interval '1 hour' ELSE now() END`,
  attempts: `CASE WHEN g % 20 = 0 THEN 2 ELSE 0 END`,
};

interface PendingStateCall {
  (options: { deadRetryMs: number }): Promise<{ ok: boolean; value?: unknown; error?: unknown }>;
}

/** Median ms of CALLS probes, after 3 untimed ones; throws when the probe fails. */
async function probe(call: PendingStateCall): Promise<{ median: number; last: unknown }> {
  let last: unknown;
  const times: number[] = [];
  for (let i = 0; i < CALLS + 3; i++) {
    const started = performance.now();
    const result = await call({ deadRetryMs: DEAD_RETRY_MS });
    const took = performance.now() - started;
    if (!result.ok) throw new Error(`pendingState failed: ${describeError(result.error)}`);
    if (i >= 3) times.push(took);
    last = result.value;
  }
  return { median: median(times), last };
}

async function vacuum(sql: Client): Promise<void> {
  await sql.query('VACUUM ANALYZE outbox_event');
}

/**
 * The health probe's query (`OutboxLeaseStore.pendingState`) with 100 undelivered rows, then
 * with BACKLOG_ROWS (one in 20 retrying, the rest due): median of 50 calls each.
 */
export const health: Scenario = {
  name: 'health',
  title: `health probe (pendingState) at ${BACKLOG_ROWS} undelivered rows vs ${SMALL}`,
  run: (server) =>
    withFreshDatabase(server, 'health', async (db) => {
      const dataSource = new DataSource({
        type: 'postgres',
        url: db.url,
        entities: [...OUTBOX_ENTITIES],
        connectTimeoutMS: 5000,
        extra: { application_name: 'bench-health' },
      });
      await dataSource.initialize();
      const figure = `health probe at ${count(BACKLOG_ROWS)} undelivered rows vs ${SMALL}`;
      try {
        const repository = new OutboxLeaseStore(dataSource);
        const call = (repository as unknown as { pendingState?: PendingStateCall }).pendingState;
        if (typeof call !== 'function') throw new Error('OutboxLeaseStore has no pendingState');
        const pendingState: PendingStateCall = (options) => call.call(repository, options);

        await insertEvents(db.sql, SMALL, MIX);
        await vacuum(db.sql);
        const small = await probe(pendingState);
        note(`${SMALL} rows: median ${ms(small.median)}; ${JSON.stringify(small.last)}`);

        const took = await insertEvents(db.sql, BACKLOG_ROWS - SMALL, { ...MIX, first: SMALL });
        await vacuum(db.sql);
        note(`inserted ${count(BACKLOG_ROWS - SMALL)} rows in ${(took / 1000).toFixed(1)} s`);
        const large = await probe(pendingState);
        note(
          `${count(BACKLOG_ROWS)} rows: median ${ms(large.median)}; ${JSON.stringify(large.last)}`,
        );
        return [
          {
            figure,
            value: `${ms(large.median)} vs ${ms(small.median)} = ${times(large.median / small.median)}`,
            target: '≤ 2 ×',
          },
        ];
      } catch (error) {
        note(`n/a: ${describeError(error)}`);
        return [{ figure, value: `n/a (${describeError(error)})`, target: '≤ 2 ×' }];
      } finally {
        await dataSource.destroy();
      }
    }),
};
