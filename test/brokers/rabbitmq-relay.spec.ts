import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { connect as amqpConnect, type Channel, type ChannelModel } from 'amqplib';
import {
  OutboxBridgeHealthIndicator,
  OutboxBridgeModule,
  OutboxPublisher,
  RELAY_HEADERS,
  rabbitMq,
  type NewOutboxEvent,
} from '@app/outbox';
import { createOutboxApp } from '../support/outbox-app';
import { useTestDatabase } from '../support/test-database';
import { startRabbitMq, type BrokerServer } from '../support/broker-servers';
import type { BrokerMessage } from './support/broker-message';
import { drainQueue } from './support/rabbitmq';
import { waitForRows } from './support/wait';

/**
 * The RabbitMQ relay against a real rabbitmq-server: delivered means the broker confirmed it
 * and a queue took it, each event is in the queue once with its properties and headers, each
 * key's events in commit order; a message no binding routes fails the delivery.
 */

const t = useTestDatabase();
let rabbit: BrokerServer;
let connection: ChannelModel;
let channel: Channel;
let app: INestApplication;
const HASH_QUEUES = [0, 1, 2, 3].map((i) => `shipments.${i}`);

beforeAll(async () => {
  rabbit = await startRabbitMq();
  connection = await amqpConnect(rabbit.url);
  channel = await connection.createChannel();
  await channel.assertExchange('orders', 'topic', { durable: true });
  await channel.assertQueue('orders.all', { durable: true });
  await channel.bindQueue('orders.all', 'orders', 'order.#');
  await channel.assertExchange('shipments', 'x-consistent-hash', { durable: true });
  for (const queue of HASH_QUEUES) {
    await channel.assertQueue(queue, { durable: true });
    // The binding key of a consistent-hash exchange is the queue's weight.
    await channel.bindQueue(queue, 'shipments', '1');
  }
  app = await createOutboxApp({
    url: t.db.url,
    outbox: { retry: { baseMs: 10, maxMs: 50, jitter: 0 }, maxAttempts: 3, pollIntervalMs: 200 },
    imports: [
      OutboxBridgeModule.forRoot({
        name: 'to-rabbit',
        events: ['order.placed', 'invoice.lost'],
        ordered: true,
        transport: rabbitMq({ url: rabbit.url, exchange: 'orders' }),
      }),
      OutboxBridgeModule.forRoot({
        name: 'to-hash',
        events: ['shipment.sent'],
        ordered: true,
        transport: rabbitMq({
          url: rabbit.url,
          exchange: 'shipments',
          routingKey: (event) => event.orderingKey,
        }),
      }),
    ],
  });
}, 90_000);

afterAll(async () => {
  await app?.close();
  await connection?.close().catch(() => undefined);
  await rabbit?.remove();
});

function event(type: string, key: number, n: number): NewOutboxEvent {
  return {
    type,
    aggregateType: 'order',
    aggregateId: String(key),
    causationId: null,
    correlationId: `corr-${key}`,
    payload: { key, n },
  };
}

/** `producers` concurrent producers, `txs` transactions each of `perTx` events over 17 keys. */
async function produce(
  type: string,
  producers: number,
  txs: number,
  perTx: number,
): Promise<string[]> {
  const emitted: string[] = [];
  const publisher = app.get(OutboxPublisher);
  const dataSource = app.get(DataSource);
  await Promise.all(
    Array.from({ length: producers }, async (_, producer) => {
      for (let tx = 0; tx < txs; tx++) {
        const events = Array.from({ length: perTx }, (_, i) =>
          event(type, producer * 1000 + (i % 17), tx * 100 + i),
        );
        const ids = await dataSource.transaction((manager) => publisher.emit(events, { manager }));
        emitted.push(...ids);
      }
    }),
  );
  return emitted;
}

/**
 * The message ids are the emitted ids, each once; says what differs in a few lines rather than
 * a diff of 10,000 entries.
 */
function expectSameIds(ids: Array<string | undefined>, emitted: string[]): void {
  const want = new Set(emitted);
  const seen = new Set<string | undefined>();
  const twice = ids.filter((id) => seen.has(id) || !seen.add(id));
  const unexpected = [...seen].filter((id) => id === undefined || !want.has(id));
  const missing = emitted.filter((id) => !seen.has(id));
  expect({
    count: ids.length,
    twice: twice.slice(0, 5),
    unexpected: unexpected.slice(0, 5),
    missing: missing.slice(0, 5),
  }).toEqual({ count: emitted.length, twice: [], unexpected: [], missing: [] });
}

/** Per key (payload.key), n only grows: the order of the commits of one producer's key. */
function expectKeyOrder(messages: BrokerMessage[]): void {
  const seen = new Map<number, number>();
  for (const m of messages) {
    const last = seen.get(m.payload.key) ?? -1;
    if (m.payload.n <= last) {
      throw new Error(`key ${m.payload.key}: n ${m.payload.n} came after ${last}`);
    }
    seen.set(m.payload.key, m.payload.n);
  }
}

it('relays 10,000 events into the queue once each, with their properties and headers, each key in commit order', async () => {
  const emitted = await produce('order.placed', 3, 100, 33);
  const publisher = app.get(OutboxPublisher);
  const rest = Array.from({ length: 10_000 - emitted.length }, (_, i) =>
    event('order.placed', 9000 + (i % 5), 100_000 + i),
  );
  emitted.push(
    ...(await app.get(DataSource).transaction((manager) => publisher.emit(rest, { manager }))),
  );
  expect(emitted).toHaveLength(10_000);
  await waitForRows(
    t.sql,
    `SELECT count(*)::int AS n FROM outbox_event WHERE type = 'order.placed' AND dispatched_at IS NULL`,
    0,
    120_000,
  );

  const messages = await drainQueue(connection, 'orders.all');
  expectSameIds(
    messages.map((m) => m.id),
    emitted,
  );
  const rows = await t.sql.query<{ id: string; ordering_key: string; occurred_at: Date }>(
    `SELECT id, ordering_key, occurred_at FROM outbox_event WHERE type = 'order.placed'`,
  );
  const byId = new Map(rows.rows.map((r) => [r.id, r]));
  for (const m of messages) {
    const row = byId.get(m.id!)!;
    expect(m.properties!.deliveryMode).toBe(2);
    expect(m.properties!.contentType).toBe('application/json');
    expect(m.properties!.type).toBe('order.placed');
    expect(m.properties!.timestamp).toBe(Math.floor(row.occurred_at.getTime() / 1000));
    expect(m.destination).toBe('order.placed');
    expect(m.headers).toEqual({
      [RELAY_HEADERS.id]: m.id,
      [RELAY_HEADERS.type]: 'order.placed',
      [RELAY_HEADERS.aggregateType]: 'order',
      [RELAY_HEADERS.aggregateId]: String(m.payload.key),
      [RELAY_HEADERS.orderingKey]: row.ordering_key,
      [RELAY_HEADERS.correlationId]: `corr-${m.payload.key}`,
      [RELAY_HEADERS.occurredAt]: row.occurred_at.toISOString(),
    });
    // The payload as JSON (as the outbox stored it: jsonb orders keys its own way).
    expect(JSON.parse(m.body)).toEqual({ key: m.payload.key, n: m.payload.n });
    expect(m.body).toBe(JSON.stringify(JSON.parse(m.body)));
  }
  // Per key, the queue holds the events in the order their transactions committed; within a
  // producer's key, that is the order of `n`.
  expectKeyOrder(messages);
}, 180_000);

it('fails an event that no binding routes (NO_ROUTE return), and says so', async () => {
  const publisher = app.get(OutboxPublisher);
  const id = await app
    .get(DataSource)
    .transaction((manager) => publisher.emit(event('invoice.lost', 1, 1), { manager }));
  await waitForRows(
    t.sql,
    `SELECT count(*)::int AS n FROM outbox_event WHERE id = '${id}' AND dead_at IS NOT NULL`,
    1,
    30_000,
  );
  const {
    rows: [row],
  } = await t.sql.query<{ attempts: number; last_error: string | null }>(
    `SELECT attempts, last_error FROM outbox_event WHERE id = $1`,
    [id],
  );
  expect(row.attempts).toBe(3);
  expect(row.last_error).toBe(
    'to-rabbit: RabbitMqPublishError: RabbitMQ returned the message: no queue is bound to ' +
      'exchange "orders" for routing key "invoice.lost" (312 NO_ROUTE)',
  );
  // Nothing of it reached a queue.
  expect(await drainQueue(connection, 'orders.all')).toEqual([]);
});

it('reports the connections in health', () => {
  const health = app.get(OutboxBridgeHealthIndicator).isHealthy();
  expect(health.brokers).toMatchObject({
    status: 'up',
    connections: {
      'relay:to-rabbit': { kind: 'rabbitmq', state: 'connected', lastError: null },
      'relay:to-hash': { kind: 'rabbitmq', state: 'connected', lastError: null },
    },
  });
});

it('routes by ordering key through a consistent-hash exchange: each key in one queue, in commit order', async () => {
  const emitted = await produce('shipment.sent', 2, 30, 34);
  await waitForRows(
    t.sql,
    `SELECT count(*)::int AS n FROM outbox_event WHERE type = 'shipment.sent' AND dispatched_at IS NULL`,
    0,
    60_000,
  );
  const queueOfKey = new Map<string, string>();
  const all: BrokerMessage[] = [];
  for (const queue of HASH_QUEUES) {
    const messages = await drainQueue(connection, queue);
    for (const m of messages) {
      const key = m.headers[RELAY_HEADERS.orderingKey] as string;
      expect(m.destination).toBe(key);
      expect(queueOfKey.get(key) ?? queue).toBe(queue);
      queueOfKey.set(key, queue);
    }
    expectKeyOrder(messages);
    all.push(...messages);
  }
  expectSameIds(
    all.map((m) => m.id),
    emitted,
  );
  // 34 keys spread over the 4 queues: the hash did spread them.
  expect(queueOfKey.size).toBe(34);
  expect(new Set(queueOfKey.values()).size).toBeGreaterThan(1);
}, 90_000);
