import { Injectable, type INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  OutboxPublisher,
  type HandlerContext,
  type NewOutboxEvent,
  type OutboxEvent,
} from '@app/outbox';
import { createOutboxApp } from './support/outbox-app';
import { useTestDatabase } from './support/test-database';

/**
 * Per-key ordering under concurrency, randomized: 4 instances over one database, 3 producers
 * emitting into 50 keys (each producer's transactions one after another, some holding two events
 * of one key), an ordered handler failing a fifth of its first tries, an unordered one beside it.
 */

const INSTANCES = 4;
const PRODUCERS = 3;
const TRANSACTIONS = 60;
const KEYS = 50;

interface Payload {
  producer: number;
  seq: number;
}

const delivered = new Map<string, Payload[]>();
const running = new Map<string, string>();
const overlaps: string[] = [];
const auditRuns = new Map<string, number>();

@Injectable()
class Handlers {
  @OnOutboxEvent('ledger', { events: ['account.credited'], ordered: true })
  async ledger(event: OutboxEvent<Payload>, ctx: HandlerContext) {
    const key = event.orderingKey;
    const me = `${event.id.slice(-6)} p${event.payload.producer}s${event.payload.seq} try${ctx.handlerAttempt}`;
    if (running.has(key)) overlaps.push(`${key}: ${running.get(key)} / ${me}`);
    running.set(key, me);
    try {
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 3));
      if (ctx.handlerAttempt === 1 && Math.random() < 0.2) throw new Error('flaky');
      delivered.set(key, [...(delivered.get(key) ?? []), event.payload]);
    } finally {
      running.delete(key);
    }
  }

  @OnOutboxEvent('audit', { events: ['account.credited'] })
  audit(event: OutboxEvent) {
    auditRuns.set(event.id, (auditRuns.get(event.id) ?? 0) + 1);
  }
}

const t = useTestDatabase();
const apps: INestApplication[] = [];

beforeAll(async () => {
  for (let i = 0; i < INSTANCES; i++) {
    apps.push(
      await createOutboxApp({
        url: t.db.url,
        outbox: {
          tuning: { pollIntervalMs: 1000 },
          retry: { baseMs: 1, maxMs: 5, jitter: 0.5 },
          maxAttempts: 10,
          retention: { enabled: false },
        },
        providers: [Handlers],
      }),
    );
  }
});

afterAll(async () => {
  for (const app of apps) await app.close();
});

it('every key reaches the ordered handler in commit order, one event at a time, across 4 instances', async () => {
  const emitted = new Map<string, Payload[]>();
  const ids: string[] = [];
  await Promise.all(
    Array.from({ length: PRODUCERS }, async (_, producer) => {
      const app = apps[producer % INSTANCES];
      let seq = 0;
      for (let i = 0; i < TRANSACTIONS; i++) {
        const key = `acct:${Math.floor(Math.random() * KEYS)}`;
        const count = Math.random() < 0.25 ? 2 : 1;
        const events: NewOutboxEvent<Payload>[] = Array.from({ length: count }, () => ({
          type: 'account.credited',
          aggregateType: 'account',
          aggregateId: key,
          orderingKey: key,
          payload: { producer, seq: seq++ },
        }));
        const written = await app
          .get(DataSource)
          .transaction((manager) => app.get(OutboxPublisher).emit(events, { manager }));
        ids.push(...written);
        emitted.set(key, [...(emitted.get(key) ?? []), ...events.map((e) => e.payload)]);
      }
    }),
  );

  const deadline = Date.now() + 60_000;
  for (;;) {
    const { rows } = await t.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM outbox_event WHERE dispatched_at IS NULL`,
    );
    if (rows[0].n === 0) break;
    if (Date.now() > deadline) throw new Error(`${rows[0].n} events never delivered`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }

  expect(overlaps).toEqual([]);
  // Commit order: each key's places, which follow commit order (see outbox-ordering-emit).
  const { rows } = await t.sql.query<{ key: string; payloads: Payload[] }>(
    `SELECT ordering_key AS key, array_agg(payload ORDER BY ordering_position) AS payloads
     FROM outbox_event GROUP BY ordering_key`,
  );
  for (const { key, payloads } of rows) {
    expect({ key, delivered: delivered.get(key) }).toEqual({ key, delivered: payloads });
    // And each producer's own events of the key in the order it committed them.
    for (let p = 0; p < PRODUCERS; p++) {
      const mine = (delivered.get(key) ?? []).filter((e) => e.producer === p).map((e) => e.seq);
      expect(mine).toEqual([...mine].sort((a, b) => a - b));
    }
  }
  expect(rows.reduce((sum, r) => sum + r.payloads.length, 0)).toBe(ids.length);
  // The unordered handler ran every event exactly once.
  expect(ids.filter((id) => auditRuns.get(id) !== 1)).toEqual([]);
});
