import { randomUUID } from 'node:crypto';
import { Injectable, type INestApplication } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type TransactionalHandlerContext } from '@app/outbox';
import {
  OutboxBridgeModule,
  OutboxInbox,
  OutboxInboxModule,
  getOutboxInboxToken,
  RELAY_HEADERS,
} from '@app/outbox/bridge';
import { createOutboxApp } from '../../support/outbox-app';
import { createTestDatabase, type TestDatabase } from '../../support/test-database';
import { plantSecret } from '../../support/log-guard';
import type { BrokerDriver, BrokerUnderTest, OutgoingMessage } from '../support/broker-driver';
import { emitTogether, orderEvent } from '../support/orders';
import { pollUntil, waitForRows } from '../support/wait';
import { bridgeOutbox } from '../support/bridge-outbox';

/** B's handler: one `booked` row per call, in B's transaction. */
@Injectable()
class Billing {
  @OnOutboxEvent('ledger', { events: ['order.placed'], transaction: true, ordered: true })
  async book(event: OutboxEvent<{ key: number; n: number }>, ctx: TransactionalHandlerContext) {
    await ctx.manager.query(`INSERT INTO booked (event_id, key, n) VALUES ($1, $2, $3)`, [
      event.id,
      event.payload.key,
      event.payload.n,
    ]);
  }
}

/**
 * Service A's outbox → the broker → service B's inbox → a transactional handler in B, each
 * service on a database of its own: every event's effect in B once, each key in order, a second
 * copy of an event a duplicate, a batch B could not store held and stored again in place, a
 * message that cannot be an event dead-lettered with its reason.
 */
export function inboxConformance(driver: BrokerDriver): void {
  let broker: BrokerUnderTest;
  let dbA: TestDatabase;
  let dbB: TestDatabase;
  let serviceA: INestApplication;
  let serviceB: INestApplication;

  beforeAll(async () => {
    broker = await driver.start();
    [dbA, dbB] = await Promise.all([createTestDatabase(), createTestDatabase()]);
    const sqlB = await dbB.connect();
    // No unique constraint: a second effect of one event would show as a second row.
    await sqlB.query(`CREATE TABLE booked (seq bigserial, event_id uuid, key int, n int)`);
    await sqlB.end();
    // Before A relays anything: the inbox's queue must be there to take it.
    const inboxTransport = await broker.inboxTransport();
    serviceA = await createOutboxApp({
      url: dbA.url,
      outbox: bridgeOutbox(),
      imports: [
        OutboxBridgeModule.forRoot({
          name: driver.relayName,
          events: ['order.placed'],
          ordered: true,
          transport: broker.relayTransport(),
        }),
      ],
    });
    serviceB = await createOutboxApp({
      url: dbB.url,
      outbox: bridgeOutbox(),
      providers: [Billing],
      imports: [
        OutboxInboxModule.forRoot({
          name: 'from-orders',
          retryDelayMs: 200,
          transport: inboxTransport,
        }),
      ],
    });
  }, 90_000);

  afterAll(async () => {
    await serviceB?.close();
    await serviceA?.close();
    await broker?.remove();
    await Promise.all([dbA?.close(), dbB?.close()]);
  });

  const inbox = () => serviceB.get<OutboxInbox>(getOutboxInboxToken('from-orders'));
  /** Every id A emitted, in emit order. */
  const all: string[] = [];

  /** `txs` transactions in A of `perTx` events each over keys 0 to 6, n from `from` on. */
  async function emitInA(txs: number, perTx: number, from = 0): Promise<string[]> {
    const emitted: string[] = [];
    for (let tx = 0; tx < txs; tx++) {
      const events = Array.from({ length: perTx }, (_, i) =>
        orderEvent('order.placed', i % 7, from + tx * 100 + i),
      );
      emitted.push(...(await emitTogether(serviceA, events)));
    }
    return emitted;
  }

  /** Checks every emitted event is booked once; returns the rows that broke their key's order. */
  async function expectBookedOnce(
    emitted: string[],
  ): Promise<Array<{ event_id: string; key: number; n: number }>> {
    const sqlB = await dbB.connect();
    try {
      const { rows } = await sqlB.query<{ event_id: string; key: number; n: number }>(
        `SELECT event_id, key, n FROM booked ORDER BY seq`,
      );
      expect(rows).toHaveLength(emitted.length);
      expect(new Set(rows.map((r) => r.event_id)).size).toBe(emitted.length);
      const want = new Set(emitted);
      expect(rows.filter((r) => !want.has(r.event_id))).toEqual([]);
      const last = new Map<number, number>();
      return rows.filter((row) => {
        const bad = row.n <= (last.get(row.key) ?? -1);
        last.set(row.key, Math.max(row.n, last.get(row.key) ?? -1));
        return bad;
      });
    } finally {
      await sqlB.end();
    }
  }

  /** How many rows B booked. */
  async function bookedInB(): Promise<number> {
    const sqlB = await dbB.connect();
    try {
      return (await sqlB.query<{ n: number }>(`SELECT count(*)::int AS n FROM booked`)).rows[0].n;
    } finally {
      await sqlB.end();
    }
  }

  it('books every event of service A once in service B, each key in the order A committed it', async () => {
    all.push(...(await emitInA(100, 20)));
    const sqlB = await dbB.connect();
    try {
      await waitForRows(sqlB, `SELECT count(*)::int AS n FROM booked`, 2000, 120_000);
      // B's events carry A's ids: the inbox's emit deduplicates on them.
      const { rows: stored } = await sqlB.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM outbox_event WHERE id = ANY($1::uuid[])`,
        [all],
      );
      expect(stored[0].n).toBe(2000);
    } finally {
      await sqlB.end();
    }
    expect(await expectBookedOnce(all)).toEqual([]);
    expect(inbox().receiver.counts).toMatchObject({ stored: 2000, duplicates: 0, rejected: 0 });
  }, 180_000);

  it('books a message the broker holds twice (a second copy published by hand) once', async () => {
    const before = await bookedInB();
    const duplicates = inbox().receiver.counts.duplicates;
    const [first] = await broker.takeOrders();
    expect(first.headers[RELAY_HEADERS.id]).toBe(first.id);
    await broker.publishCopy(first);
    await pollUntil(() => inbox().receiver.counts.duplicates !== duplicates, 10_000);
    expect(inbox().receiver.counts.duplicates).toBe(duplicates + 1);
    await new Promise((r) => setTimeout(r, 500));
    expect(await bookedInB()).toBe(before);
  });

  const republished = driver.dropsRepublishes
    ? 'which the broker drops (duplicate window)'
    : 'which reaches B as a duplicate';
  it(`books an event A republishes after a crash between the broker's ack and the settle once, ${republished}`, async () => {
    const sqlA = await dbA.connect();
    try {
      const before = await bookedInB();
      const duplicates = inbox().receiver.counts.duplicates;
      await broker.takeOrders();
      // The last event of key 3: delivered, and nothing later of its key waits behind it.
      const {
        rows: [{ id }],
      } = await sqlA.query<{ id: string }>(
        `SELECT id FROM outbox_event WHERE type = 'order.placed' AND aggregate_id = '3'
         ORDER BY ordering_position DESC LIMIT 1`,
      );
      // As if the process died after the broker's ack and before the settle committed: the row
      // is live again, due now, without the relay's delivery.
      const { rowCount } = await sqlA.query(
        `UPDATE outbox_event
            SET deliveries = deliveries - $2::text, dispatched_at = NULL,
                next_attempt_at = now(), lease_expires_at = NULL
          WHERE id = $1 AND dispatched_at IS NOT NULL AND deliveries ? $2`,
        [id, driver.relayName],
      );
      expect(rowCount).toBe(1);
      await waitForRows(
        sqlA,
        `SELECT count(*)::int AS n FROM outbox_event WHERE id = '${id}' AND dispatched_at IS NOT NULL`,
        1,
        30_000,
      );
      // Settled after the broker's ack: a copy it kept is there by now.
      const copies = (await broker.takeOrders()).map((m) => m.id);
      expect(copies).toEqual(driver.dropsRepublishes ? [] : [id]);
      const expected = duplicates + copies.length;
      await pollUntil(() => inbox().receiver.counts.duplicates === expected, 10_000);
      expect(inbox().receiver.counts.duplicates).toBe(expected);
      await new Promise((r) => setTimeout(r, 500));
      expect(await bookedInB()).toBe(before);
      const sqlB = await dbB.connect();
      const { rows } = await sqlB.query(`SELECT seq FROM booked WHERE event_id = $1`, [id]);
      await sqlB.end();
      expect(rows).toHaveLength(1);
    } finally {
      await sqlA.end();
    }
  });

  it('holds messages while B cannot store them, then books each once and in order', async () => {
    const sqlB = await dbB.connect();
    try {
      // B's store fails (a real database error, not a refusal) while `inbox_down` has a row.
      await sqlB.query(`
        CREATE TABLE inbox_down (x int);
        INSERT INTO inbox_down VALUES (1);
        CREATE FUNCTION inbox_down_check() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF EXISTS (SELECT 1 FROM inbox_down) THEN RAISE EXCEPTION 'inbox store is down'; END IF;
          RETURN NEW;
        END $$;
        CREATE TRIGGER inbox_down BEFORE INSERT ON outbox_event
          FOR EACH ROW EXECUTE FUNCTION inbox_down_check();
      `);
      const retried = inbox().receiver.counts.retried;
      all.push(...(await emitInA(5, 20, 500_000)));
      // The first batch that came is held through several tries (`retried` counts its messages
      // once per try), and nothing of the 100 is stored meanwhile.
      for (let i = 0; i < 5; i++) {
        const before = inbox().receiver.counts.retried;
        await pollUntil(() => inbox().receiver.counts.retried !== before, 5_000, 50);
      }
      expect(inbox().receiver.counts.retried).toBeGreaterThanOrEqual(retried + 5);
      expect(await bookedInB()).toBe(2000);
      await sqlB.query(`DELETE FROM inbox_down`);
      await waitForRows(sqlB, `SELECT count(*)::int AS n FROM booked`, 2100, 30_000);
    } finally {
      await sqlB.query(`DROP TRIGGER IF EXISTS inbox_down ON outbox_event`).catch(() => undefined);
      await sqlB.end();
    }
    // Once each, and each key in A's commit order: the batch that failed was held and stored
    // again before anything behind it.
    expect(await expectBookedOnce(all)).toEqual([]);
  }, 60_000);

  it('rejects a message that is not JSON to the dead letters with the reason, and nothing of it in B', async () => {
    const secret = plantSecret('hunter2');
    const message: OutgoingMessage = {
      id: randomUUID(),
      destination: broker.destinationOf('order.placed'),
      body: `password=${secret} {not json`,
      headers: {
        [RELAY_HEADERS.type]: 'order.placed',
        [RELAY_HEADERS.aggregateType]: 'order',
        [RELAY_HEADERS.aggregateId]: '1',
        [RELAY_HEADERS.orderingKey]: 'order:1',
        authorization: `Bearer ${plantSecret('s3cr3t-t0ken')}`,
      },
    };
    message.headers[RELAY_HEADERS.id] = message.id;
    await broker.publish(message);
    const [dead, ...more] = await broker.takeDeadLetters(1);
    expect(more).toEqual([]);
    expect(Buffer.byteLength(message.body)).toBe(26);
    expect(dead.headers[driver.rejectReasonHeader]).toBe('the body is not JSON (26 bytes)');
    expect(dead.headers[RELAY_HEADERS.type]).toBe('order.placed');
    expect(dead.body).toBe(message.body);
    broker.expectDeadLetterEnvelope(dead, message);
    const sqlB = await dbB.connect();
    try {
      const { rows } = await sqlB.query(
        `SELECT id FROM outbox_event WHERE id = $1 OR payload::text LIKE '%hunter2%'`,
        [message.id],
      );
      expect(rows).toEqual([]);
    } finally {
      await sqlB.end();
    }
    expect(inbox().receiver.counts.rejected).toBe(1);
  });
}
