import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { OutboxPublisher } from '@app/outbox';
import { OutboxBridgeHealthIndicator, natsJetStream } from '@app/outbox/bridge';
import { useTestDatabase } from '../support/test-database';
import { startNatsServer, type BrokerServer } from '../support/broker-servers';
import { readStream } from './support/jetstream';
import { waitForRows } from './support/wait';
import { createRelayApp } from './support/bridge-outbox';

/**
 * A broker that is not there at boot delays the boot by the connect bound at most; the relay's
 * deliveries fail and retry until it comes, then go through. Shutdown does not wait for it.
 */

const t = useTestDatabase();
let nats: BrokerServer;
let app: INestApplication;

beforeAll(async () => {
  nats = await startNatsServer();
  await nats.stop();
}, 60_000);

afterAll(async () => {
  await app?.close();
  await nats?.remove();
});

it('boots without the broker, retries its deliveries, and delivers once the broker is up', async () => {
  const bootStarted = Date.now();
  app = await createRelayApp(
    t.db.url,
    {
      name: 'to-nats',
      events: ['order.placed'],
      transport: natsJetStream({
        servers: nats.url,
        connectTimeoutMs: 500,
        reconnect: { baseMs: 100, maxMs: 300 },
      }),
    },
    { retry: { baseMs: 100, maxMs: 300, jitter: 0 }, maxAttempts: 1000 },
  );
  const bootMs = Date.now() - bootStarted;
  expect(bootMs).toBeLessThan(10_000);
  expect(app.get(OutboxBridgeHealthIndicator).isHealthy().brokers).toMatchObject({
    status: 'down',
    connections: { 'relay:to-nats': { state: 'connecting' } },
  });
  const id = await app
    .get(DataSource)
    .transaction((manager) =>
      app
        .get(OutboxPublisher)
        .emit(
          { type: 'order.placed', aggregateType: 'order', aggregateId: '1', payload: { n: 1 } },
          { manager },
        ),
    );
  await waitForRows(
    t.sql,
    `SELECT count(*)::int AS n FROM outbox_event WHERE id = '${id}' AND attempts >= 2`,
    1,
    10_000,
  );
  const { rows } = await t.sql.query<{ last_error: string }>(
    `SELECT last_error FROM outbox_event WHERE id = $1`,
    [id],
  );
  expect(rows[0].last_error).toMatch(
    new RegExp(`^to-nats: Error: NATS relay \\(${nats.url}\\) is not connected \\(connecting: `),
  );

  await nats.start();
  const client: NatsConnection = await connect({ servers: nats.url });
  await (await jetstreamManager(client)).streams.add({ name: 'ORDERS', subjects: ['outbox.>'] });
  await waitForRows(
    t.sql,
    `SELECT count(*)::int AS n FROM outbox_event WHERE id = '${id}' AND dispatched_at IS NOT NULL`,
    1,
    20_000,
  );
  expect((await readStream(await jetstreamManager(client), 'ORDERS')).map((m) => m.id)).toEqual([
    id,
  ]);
  await client.close();
  expect(app.get(OutboxBridgeHealthIndicator).isHealthy().brokers.status).toBe('up');
}, 60_000);

it('shuts down within its bounds while the broker is away', async () => {
  await nats.stop();
  const started = Date.now();
  await app.close();
  app = undefined as unknown as INestApplication;
  expect(Date.now() - started).toBeLessThan(15_000);
});
