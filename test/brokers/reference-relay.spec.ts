import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/nats-core';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { OutboxBridgeHealthIndicator, RELAY_HEADERS } from '@app/outbox/bridge';
import { createReferenceApp, OPERATOR } from '../support/reference-app';
import { useTestDatabase } from '../support/test-database';
import { startNatsServer, type BrokerServer } from '../support/broker-servers';
import { readStream } from './support/jetstream';

/** The reference app with NATS_URL set: its events also reach a JetStream stream. */

const t = useTestDatabase();
let nats: BrokerServer;
let client: NatsConnection;
let jsm: JetStreamManager;
let app: INestApplication;

beforeAll(async () => {
  nats = await startNatsServer();
  client = await connect({ servers: nats.url });
  jsm = await jetstreamManager(client);
  await jsm.streams.add({ name: 'SAAS', subjects: ['saas.>'] });
  app = await createReferenceApp(t.db.url, { NATS_URL: nats.url });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await client?.close();
  await nats?.remove();
});

it('relays an organization.created event to saas.organization.created', async () => {
  const res = await request(app.getHttpServer())
    .post('/organizations')
    .set(OPERATOR)
    .send({ name: 'Relayed', adminEmail: 'admin@relayed.test' })
    .expect(201);
  const eventId = (res.body as { eventId: string }).eventId;
  let messages = await readStream(jsm, 'SAAS');
  for (let i = 0; i < 100 && messages.length === 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    messages = await readStream(jsm, 'SAAS');
  }
  expect(messages.map((m) => [m.destination, m.id])).toEqual([
    ['saas.organization.created', eventId],
  ]);
  expect(messages[0].headers[RELAY_HEADERS.organizationId]).toBe((res.body as { id: string }).id);
  expect(app.get(OutboxBridgeHealthIndicator).isHealthy().brokers.status).toBe('up');
});
