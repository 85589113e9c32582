import { performance } from 'node:perf_hooks';
import { OutboxEngine } from '../../libs/outbox/src';
import { createOutboxApp } from '../support/app';
import { EVENTS } from '../support/config';
import {
  countDelivered,
  insertEvents,
  waitUntilSettled,
  withFreshDatabase,
} from '../support/database';
import { BENCH_EFFECT_TABLE, handlerRuns, ranAll, type HandlerKind } from '../support/handlers';
import { count, note, times } from '../support/report';
import { transactionalLoopBurnDown } from '../support/transactional-loop';
import type { Scenario } from './scenario';

const TIMEOUT_MS = 180_000;
/** Slots of each run, with a pool that has room for every transactional handler at once. */
const CONCURRENCY = 20;
const POOL_SIZE = 30;

/**
 * The price of a transactional handler: the same backlog burnt down by a handler that writes one
 * row through the outbox's transaction (its delivery recorded in it, guarded by the attempt), by
 * one that writes the same row on its own (autocommit, at-least-once), and by the same
 * transaction written by hand over as many connections as the module has slots.
 */
export const transactional: Scenario = {
  name: 'transactional',
  title: `burn-down of ${EVENTS} events, transactional vs plain effect handler`,
  run: (server) =>
    withFreshDatabase(server, 'transactional', async (db) => {
      const rates: Partial<Record<HandlerKind, number>> = {};
      for (const handler of ['plain-effect', 'tx-effect'] as const) {
        await db.sql.query('TRUNCATE outbox_event');
        await db.sql.query(BENCH_EFFECT_TABLE);
        await db.sql.query('TRUNCATE bench_effect');
        await insertEvents(db.sql, EVENTS);
        await db.sql.query('VACUUM ANALYZE outbox_event');
        const app = await createOutboxApp(db.url, {
          handler,
          autoStart: false,
          poolSize: POOL_SIZE,
          outbox: { concurrency: CONCURRENCY },
        });
        try {
          handlerRuns.count = 0;
          const started = performance.now();
          await app.get(OutboxEngine).start();
          const settled = await waitUntilSettled(db.sql, TIMEOUT_MS, 5, ranAll(EVENTS));
          const seconds = (performance.now() - started) / 1000;
          const delivered = settled ? EVENTS : await countDelivered(db.sql);
          rates[handler] = delivered / seconds;
          const { rows } = await db.sql.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM bench_effect',
          );
          note(`${handler}: ${count(rates[handler])} events/s, ${count(rows[0].n)} effect rows`);
        } finally {
          await app.close();
        }
      }
      await db.sql.query('TRUNCATE outbox_event, bench_effect');
      await insertEvents(db.sql, EVENTS);
      await db.sql.query('VACUUM ANALYZE outbox_event');
      const loop = await transactionalLoopBurnDown(db.url, CONCURRENCY);
      note(`hand-written loop: ${count(loop.rate)} events/s over ${CONCURRENCY} connections`);
      const tx = rates['tx-effect']!;
      const plain = rates['plain-effect']!;
      return [
        {
          figure: 'transactional vs plain effect handler',
          value: `${count(tx)} vs ${count(plain)} events/s = ${times(tx / plain)}`,
          target: '≥ 0.5 ×',
        },
        {
          figure: 'transactional vs hand-written loop',
          value: `${count(tx)} vs ${count(loop.rate)} events/s = ${times(tx / loop.rate)}`,
          target: '≥ 0.9 ×',
        },
      ];
    }),
};
