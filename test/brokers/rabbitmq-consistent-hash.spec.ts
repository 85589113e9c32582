import type { INestApplication } from '@nestjs/common';
import { connect as amqpConnect, type ChannelModel } from 'amqplib';
import { OutboxBridgeHealthIndicator, RELAY_HEADERS, rabbitMq } from '@app/outbox/bridge';
import { useTestDatabase } from '../support/test-database';
import { startRabbitMq, type BrokerServer } from '../support/broker-servers';
import { expectKeyOrder, expectSameIds } from './support/message-checks';
import { emitConcurrently } from './support/orders';
import type { BrokerMessage } from './support/broker-message';
import { drainQueue } from './support/rabbitmq';
import { waitForRows } from './support/wait';
import { createRelayApp } from './support/bridge-outbox';

/**
 * RabbitMQ alone has exchanges that route by a key the relay chooses: with the ordering key as
 * the routing key of an `x-consistent-hash` exchange, each key's events land in one queue, in
 * commit order, and the keys spread over the queues. (The relay suite every transport runs is
 * relay.spec.ts.)
 */

const t = useTestDatabase();
let rabbit: BrokerServer;
let connection: ChannelModel;
let app: INestApplication;
const HASH_QUEUES = [0, 1, 2, 3].map((i) => `shipments.${i}`);

beforeAll(async () => {
  rabbit = await startRabbitMq();
  connection = await amqpConnect(rabbit.url);
  const channel = await connection.createChannel();
  await channel.assertExchange('shipments', 'x-consistent-hash', { durable: true });
  for (const queue of HASH_QUEUES) {
    await channel.assertQueue(queue, { durable: true });
    // The binding key of a consistent-hash exchange is the queue's weight.
    await channel.bindQueue(queue, 'shipments', '1');
  }
  app = await createRelayApp(
    t.db.url,
    {
      name: 'to-hash',
      events: ['shipment.sent'],
      ordered: true,
      transport: rabbitMq({
        url: rabbit.url,
        exchange: 'shipments',
        routingKey: (event) => event.orderingKey,
      }),
    },
    { retry: { baseMs: 10, maxMs: 50, jitter: 0 }, maxAttempts: 3 },
  );
}, 90_000);

afterAll(async () => {
  await app?.close();
  await connection?.close().catch(() => undefined);
  await rabbit?.remove();
});

it('routes by ordering key through a consistent-hash exchange: each key in one queue, in commit order', async () => {
  const emitted = await emitConcurrently(app, 'shipment.sent', {
    producers: 2,
    txs: 30,
    perTx: 34,
  });
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

it('reports the connection of the relay to the consistent-hash exchange in health', () => {
  const health = app.get(OutboxBridgeHealthIndicator).isHealthy();
  expect(health.brokers).toMatchObject({
    status: 'up',
    connections: {
      'relay:to-hash': { kind: 'rabbitmq', state: 'connected', lastError: null },
    },
  });
});
