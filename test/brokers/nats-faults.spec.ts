import { Injectable, type INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/nats-core';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import {
  OnOutboxEvent,
  OutboxBridgeHealthIndicator,
  OutboxBridgeModule,
  OutboxPublisher,
  natsJetStream,
  type BrokerConnectionState,
  type OutboxEvent,
} from '@app/outbox';
import { createOutboxApp } from '../support/outbox-app';
import { useTestDatabase } from '../support/test-database';
import { startNatsServer, type BrokerServer } from '../support/broker-servers';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy';
import { readStream } from './support/jetstream';
import { waitForRows } from './support/wait';

/**
 * The JetStream relay while the broker restarts or its network path goes silent: nothing lost,
 * nothing twice in the stream (the republishes carry the same Nats-Msg-Id), and the engine goes
 * on delivering to local handlers all along.
 */

const t = useTestDatabase();
let nats: BrokerServer;
let proxy: TcpProxy;
let client: NatsConnection;
let jsm: JetStreamManager;
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
  nats = await startNatsServer();
  proxy = await startTcpProxy({ host: '127.0.0.1', port: nats.port });
  client = await connect({ servers: nats.url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  jsm = await jetstreamManager(client);
  await jsm.streams.add({ name: 'ORDERS', subjects: ['outbox.order.>'] });
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
        name: 'to-nats',
        events: ['order.placed'],
        timeoutMs: 3000,
        transport: natsJetStream({
          servers: `nats://127.0.0.1:${proxy.port}`,
          publishTimeoutMs: 1000,
          reconnect: { baseMs: 100, maxMs: 1000 },
          // Faster than the defaults, to keep the suite short.
          connection: { pingInterval: 1000, maxPingOut: 2 },
        }),
      }),
    ],
  });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await client?.close();
  await proxy?.close();
  await nats?.remove();
});

const watchStates = () => {
  const timer = setInterval(() => {
    const health = app.get(OutboxBridgeHealthIndicator).isHealthy();
    states.add(health.brokers.connections['relay:to-nats'].state);
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

const undelivered = `SELECT count(*)::int AS n FROM outbox_event WHERE dispatched_at IS NULL`;

it('loses nothing and stores nothing twice while the broker restarts mid-run', async () => {
  const stop = watchStates();
  const emitted: string[] = [];
  for (let batch = 0; batch < 30; batch++) {
    emitted.push(...(await emit(batch * 100, 100)));
    if (batch === 10) await nats.restart();
    if (batch === 20) await nats.kill().then(() => nats.start());
    await new Promise((r) => setTimeout(r, 20));
  }
  await waitForRows(t.sql, undelivered, 0, 90_000);
  stop();
  const messages = await readStream(jsm, 'ORDERS');
  expect(messages.map((m) => m.id).sort()).toEqual([...emitted].sort());
  expect(states).toContain('reconnecting');
}, 120_000);

it('goes on delivering to local handlers while the broker path is black-holed, and catches up after', async () => {
  await jsm.streams.purge('ORDERS');
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
    `SELECT count(*)::int AS n FROM outbox_event WHERE deliveries ? 'to-nats' AND id = ANY($1::uuid[])`,
    [emitted],
  );
  expect(rows[0].n).toBe(0);
  proxy.setMode('forward');
  await waitForRows(t.sql, undelivered, 0, 60_000);
  stop();
  const messages = await readStream(jsm, 'ORDERS');
  expect(messages.map((m) => m.id).sort()).toEqual([...emitted].sort());
  expect(states).toContain('reconnecting');
}, 120_000);
