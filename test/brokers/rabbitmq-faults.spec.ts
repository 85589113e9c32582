import { Injectable, type INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { connect as amqpConnect } from 'amqplib';
import {
  OnOutboxEvent,
  OutboxBridgeHealthIndicator,
  OutboxBridgeModule,
  OutboxPublisher,
  rabbitMq,
  type BrokerConnectionState,
  type OutboxEvent,
} from '@app/outbox';
import { createOutboxApp } from '../support/outbox-app';
import { useTestDatabase } from '../support/test-database';
import { startRabbitMq, type BrokerServer } from '../support/broker-servers';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy';
import { drainQueue } from './support/rabbitmq';
import { waitForRows } from './support/wait';

/**
 * The RabbitMQ relay while the broker restarts or its network path goes silent: nothing lost;
 * RabbitMQ does not deduplicate, so a message is in the queue twice only as a republish of the
 * same event (same message id, after a confirm lost with the connection); and the engine goes
 * on delivering to local handlers all along.
 */

const t = useTestDatabase();
let rabbit: BrokerServer;
let proxy: TcpProxy;
let app: INestApplication;
const local: Array<{ id: string; at: number }> = [];
const states = new Set<BrokerConnectionState>();

@Injectable()
class Local {
  @OnOutboxEvent('local-noop', { events: ['order.placed'] })
  noop(event: OutboxEvent) {
    local.push({ id: event.id, at: Date.now() });
  }
}

beforeAll(async () => {
  rabbit = await startRabbitMq();
  proxy = await startTcpProxy({ host: '127.0.0.1', port: rabbit.port });
  const connection = await amqpConnect(rabbit.url);
  const channel = await connection.createChannel();
  await channel.assertExchange('orders', 'topic', { durable: true });
  await channel.assertQueue('orders.all', { durable: true });
  await channel.bindQueue('orders.all', 'orders', 'order.#');
  await connection.close();
  app = await createOutboxApp({
    url: t.db.url,
    outbox: {
      retry: { baseMs: 100, maxMs: 1000, jitter: 0.2 },
      maxAttempts: 100,
      pollIntervalMs: 200,
    },
    providers: [Local],
    imports: [
      OutboxBridgeModule.forRoot({
        name: 'to-rabbit',
        events: ['order.placed'],
        timeoutMs: 3000,
        transport: rabbitMq({
          // A 1 s heartbeat rather than the library's 5 s, to keep the suite short.
          url: `amqp://guest:guest@127.0.0.1:${proxy.port}?heartbeat=1`,
          exchange: 'orders',
          publishTimeoutMs: 1000,
          connectTimeoutMs: 2000,
          reconnect: { baseMs: 100, maxMs: 1000 },
        }),
      }),
    ],
  });
}, 90_000);

afterAll(async () => {
  await app?.close();
  await proxy?.close();
  await rabbit?.remove();
});

const watchStates = () => {
  const timer = setInterval(() => {
    const health = app.get(OutboxBridgeHealthIndicator).isHealthy();
    states.add(health.brokers.connections['relay:to-rabbit'].state);
  }, 20);
  return () => clearInterval(timer);
};

async function emit(from: number, count: number): Promise<string[]> {
  const events = Array.from({ length: count }, (_, i) => ({
    type: 'order.placed',
    aggregateType: 'order',
    aggregateId: String((from + i) % 11),
    payload: { key: (from + i) % 11, n: from + i },
  }));
  const publisher = app.get(OutboxPublisher);
  return app.get(DataSource).transaction((manager) => publisher.emit(events, { manager }));
}

/** Every message of the queue, read on a connection of the test's own, straight to the broker. */
async function readQueue(): Promise<Array<string | undefined>> {
  const connection = await amqpConnect(rabbit.url);
  try {
    return (await drainQueue(connection, 'orders.all')).map((m) => m.id);
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/** The queue's message ids are the emitted ids; returns how many are there more than once. */
function expectEveryIdOnceOrRepublished(ids: Array<string | undefined>, emitted: string[]) {
  const want = new Set(emitted);
  const distinct = new Set(ids);
  expect({
    missing: emitted.filter((id) => !distinct.has(id)).slice(0, 5),
    unexpected: [...distinct].filter((id) => id === undefined || !want.has(id)).slice(0, 5),
  }).toEqual({ missing: [], unexpected: [] });
  return ids.length - distinct.size;
}

const undelivered = `SELECT count(*)::int AS n FROM outbox_event WHERE dispatched_at IS NULL`;

it('loses nothing, and repeats only republishes of the same message id, while the broker restarts mid-run', async () => {
  const stop = watchStates();
  const emitted: string[] = [];
  for (let batch = 0; batch < 30; batch++) {
    emitted.push(...(await emit(batch * 100, 100)));
    if (batch === 10) await rabbit.restart();
    if (batch === 20) await rabbit.kill().then(() => rabbit.start());
    await new Promise((r) => setTimeout(r, 20));
  }
  await waitForRows(t.sql, undelivered, 0, 60_000);
  stop();
  const ids = await readQueue();
  const duplicates = expectEveryIdOnceOrRepublished(ids, emitted);
  process.stdout.write(
    `rabbitmq-faults: ${ids.length} messages for ${emitted.length} events, ${duplicates} republished duplicates\n`,
  );
  expect(ids.length).toBe(emitted.length + duplicates);
  expect(local.filter((l) => emitted.includes(l.id))).toHaveLength(emitted.length);
  expect(states).toContain('reconnecting');
}, 120_000);

it('goes on delivering to local handlers while the broker path is black-holed, and catches up after', async () => {
  states.clear();
  const stop = watchStates();
  proxy.blackhole();
  proxy.setMode('hang');
  const blackholedAt = Date.now();
  const emitted = await emit(10_000, 200);
  // Local deliveries go on: the relay's failures cost their own slots only for their budget.
  await waitForRows(
    t.sql,
    `SELECT count(*)::int AS n FROM outbox_event WHERE deliveries ? 'local-noop' AND id = ANY('{${emitted.join(',')}}'::uuid[])`,
    200,
    15_000,
  );
  expect(Date.now() - blackholedAt).toBeLessThan(15_000);
  const { rows } = await t.sql.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM outbox_event WHERE deliveries ? 'to-rabbit' AND id = ANY($1::uuid[])`,
    [emitted],
  );
  expect(rows[0].n).toBe(0);
  proxy.setMode('forward');
  await waitForRows(t.sql, undelivered, 0, 60_000);
  stop();
  const ids = await readQueue();
  const duplicates = expectEveryIdOnceOrRepublished(ids, emitted);
  process.stdout.write(
    `rabbitmq-faults (black hole): ${ids.length} messages for ${emitted.length} events, ${duplicates} duplicates\n`,
  );
  expect(states).toContain('reconnecting');
}, 120_000);
