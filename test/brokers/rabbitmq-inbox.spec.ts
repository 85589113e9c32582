import { randomUUID } from 'node:crypto';
import { Injectable, type INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { connect as amqpConnect, type Channel, type ChannelModel } from 'amqplib';
import {
  OnOutboxEvent,
  OutboxBridgeModule,
  OutboxInbox,
  OutboxInboxModule,
  getOutboxInboxToken,
  OutboxPublisher,
  RELAY_HEADERS,
  rabbitMq,
  rabbitMqInbox,
  type OutboxEvent,
  type TransactionalHandlerContext,
} from '@app/outbox';
import { createOutboxApp } from '../support/outbox-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { startRabbitMq, type BrokerServer } from '../support/broker-servers';
import { plantSecret } from '../support/log-guard';
import { drainQueue, waitForDepth } from './support/rabbitmq';
import { waitForRows } from './support/wait';

/**
 * Service A's outbox → RabbitMQ → service B's inbox → a transactional handler in B, each
 * service on a database of its own: every event's effect in B once, each key in order, a
 * republish of the same event a duplicate, a message that cannot be an event dead-lettered
 * with its reason.
 */

let rabbit: BrokerServer;
let connection: ChannelModel;
let channel: Channel;
let dbA: TestDatabase;
let dbB: TestDatabase;
let serviceA: INestApplication;
let serviceB: INestApplication;

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

beforeAll(async () => {
  rabbit = await startRabbitMq();
  connection = await amqpConnect(rabbit.url);
  channel = await connection.createChannel();
  await channel.assertExchange('orders', 'topic', { durable: true });
  await channel.assertQueue('billing', { durable: true });
  await channel.bindQueue('billing', 'orders', 'order.#');
  await channel.assertExchange('orders.dead', 'topic', { durable: true });
  await channel.assertQueue('billing.dead', { durable: true });
  await channel.bindQueue('billing.dead', 'orders.dead', '#');
  [dbA, dbB] = await Promise.all([createTestDatabase(), createTestDatabase()]);
  const sqlB = await dbB.connect();
  // No unique constraint: a second effect of one event would show as a second row.
  await sqlB.query(`CREATE TABLE booked (seq bigserial, event_id uuid, key int, n int)`);
  await sqlB.end();
  serviceA = await createOutboxApp({
    url: dbA.url,
    outbox: { pollIntervalMs: 200 },
    imports: [
      OutboxBridgeModule.forRoot({
        name: 'to-rabbit',
        events: ['order.placed'],
        ordered: true,
        transport: rabbitMq({ url: rabbit.url, exchange: 'orders' }),
      }),
    ],
  });
  serviceB = await createOutboxApp({
    url: dbB.url,
    outbox: { pollIntervalMs: 200 },
    providers: [Billing],
    imports: [
      OutboxInboxModule.forRoot({
        name: 'from-orders',
        retryDelayMs: 200,
        transport: rabbitMqInbox({
          url: rabbit.url,
          queue: 'billing',
          deadLetter: { exchange: 'orders.dead' },
        }),
      }),
    ],
  });
}, 90_000);

afterAll(async () => {
  await serviceB?.close();
  await serviceA?.close();
  await connection?.close().catch(() => undefined);
  await rabbit?.remove();
  await Promise.all([dbA?.close(), dbB?.close()]);
});

const booked = `SELECT count(*)::int AS n FROM booked`;
const inbox = () => serviceB.get<OutboxInbox>(getOutboxInboxToken('from-orders'));

async function emitInA(txs: number, perTx: number, from = 0): Promise<string[]> {
  const publisher = serviceA.get(OutboxPublisher);
  const dataSource = serviceA.get(DataSource);
  const emitted: string[] = [];
  for (let tx = 0; tx < txs; tx++) {
    const events = Array.from({ length: perTx }, (_, i) => ({
      type: 'order.placed',
      aggregateType: 'order',
      aggregateId: String(i % 7),
      payload: { key: i % 7, n: from + tx * 100 + i },
    }));
    emitted.push(
      ...(await dataSource.transaction((manager) => publisher.emit(events, { manager }))),
    );
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

const all: string[] = [];

it('books every event of service A once in service B, each key in the order A committed it', async () => {
  all.push(...(await emitInA(100, 20)));
  const sqlB = await dbB.connect();
  try {
    await waitForRows(sqlB, booked, 2000, 60_000);
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
}, 120_000);

it('books an event A republishes after a crash between the confirm and the settle once', async () => {
  const sqlA = await dbA.connect();
  const sqlB = await dbB.connect();
  try {
    const before = (await sqlB.query<{ n: number }>(booked)).rows[0].n;
    const duplicates = inbox().receiver.counts.duplicates;
    // The last event of key 3: delivered, and nothing later of its key waits behind it.
    const {
      rows: [{ id }],
    } = await sqlA.query<{ id: string }>(
      `SELECT id FROM outbox_event WHERE type = 'order.placed' AND aggregate_id = '3'
       ORDER BY ordering_position DESC LIMIT 1`,
    );
    // As if the process died after RabbitMQ confirmed and before the settle committed: the row
    // is live again, due now, without the relay's delivery.
    const { rowCount } = await sqlA.query(
      `UPDATE outbox_event
          SET deliveries = deliveries - 'to-rabbit', dispatched_at = NULL,
              next_attempt_at = now(), lease_expires_at = NULL
        WHERE id = $1 AND dispatched_at IS NOT NULL AND deliveries ? 'to-rabbit'`,
      [id],
    );
    expect(rowCount).toBe(1);
    await waitForRows(
      sqlA,
      `SELECT count(*)::int AS n FROM outbox_event WHERE id = '${id}' AND dispatched_at IS NOT NULL`,
      1,
      30_000,
    );
    for (let i = 0; i < 100 && inbox().receiver.counts.duplicates === duplicates; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(inbox().receiver.counts.duplicates).toBe(duplicates + 1);
    await new Promise((r) => setTimeout(r, 500));
    expect((await sqlB.query<{ n: number }>(booked)).rows[0].n).toBe(before);
    const { rows } = await sqlB.query(`SELECT seq FROM booked WHERE event_id = $1`, [id]);
    expect(rows).toHaveLength(1);
  } finally {
    await sqlA.end();
    await sqlB.end();
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
    const tries = async () => {
      const before = inbox().receiver.counts.retried;
      for (let i = 0; i < 100 && inbox().receiver.counts.retried === before; i++) {
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    for (let i = 0; i < 5; i++) await tries();
    expect(inbox().receiver.counts.retried).toBeGreaterThanOrEqual(retried + 5);
    expect((await sqlB.query<{ n: number }>(booked)).rows[0].n).toBe(2000);
    await sqlB.query(`DELETE FROM inbox_down`);
    await waitForRows(sqlB, booked, 2100, 30_000);
  } finally {
    await sqlB.query(`DROP TRIGGER IF EXISTS inbox_down ON outbox_event`).catch(() => undefined);
    await sqlB.end();
  }
  // Once each, and each key in A's commit order: the batch that failed was held and stored
  // again before anything behind it.
  expect(await expectBookedOnce(all)).toEqual([]);
}, 60_000);

it('rejects a message that is not JSON to the dead-letter exchange with the reason, and nothing of it in B', async () => {
  const secret = plantSecret('hunter2');
  const id = randomUUID();
  const body = Buffer.from(`password=${secret} {not json`);
  await new Promise<void>((resolve, reject) => {
    void (async () => {
      const confirm = await connection.createConfirmChannel();
      confirm.publish(
        'orders',
        'order.placed',
        body,
        {
          persistent: true,
          messageId: id,
          contentType: 'application/json',
          headers: {
            [RELAY_HEADERS.id]: id,
            [RELAY_HEADERS.type]: 'order.placed',
            [RELAY_HEADERS.aggregateType]: 'order',
            [RELAY_HEADERS.aggregateId]: '1',
            [RELAY_HEADERS.orderingKey]: 'order:1',
          },
        },
        (error) => (error ? reject(error as Error) : resolve()),
      );
      await confirm.waitForConfirms();
      await confirm.close();
    })().catch(reject);
  });
  await waitForDepth(channel, 'billing.dead', 1, 15_000);
  const [dead] = await drainQueue(connection, 'billing.dead');
  expect(dead.headers['x-outbox-reject-reason']).toBe(
    `the body is not JSON (${body.length} bytes)`,
  );
  expect(body.length).toBe(26);
  expect(dead.headers[RELAY_HEADERS.type]).toBe('order.placed');
  expect(dead.id).toBe(id);
  expect(dead.destination).toBe('order.placed');
  expect(dead.body).toBe(body.toString());
  const sqlB = await dbB.connect();
  try {
    const { rows } = await sqlB.query(
      `SELECT id FROM outbox_event WHERE id = $1 OR payload::text LIKE '%hunter2%'`,
      [id],
    );
    expect(rows).toEqual([]);
  } finally {
    await sqlB.end();
  }
  expect(inbox().receiver.counts.rejected).toBe(1);
});
