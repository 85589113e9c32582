import { Injectable, type INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { connect } from '@nats-io/transport-node';
import { headers, type NatsConnection } from '@nats-io/nats-core';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import {
  OnOutboxEvent,
  OutboxBridgeModule,
  OutboxInbox,
  OutboxInboxModule,
  getOutboxInboxToken,
  OutboxPublisher,
  RELAY_HEADERS,
  natsJetStream,
  natsJetStreamInbox,
  type OutboxEvent,
  type TransactionalHandlerContext,
} from '@app/outbox';
import { createOutboxApp } from '../support/outbox-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { startNatsServer, type BrokerServer } from '../support/broker-servers';
import { readStream } from './support/jetstream';
import { waitForRows } from './support/wait';

/**
 * Service A's outbox → JetStream → service B's inbox → a transactional handler in B, each
 * service on a database of its own: every event's effect in B once, each key in order.
 */

let nats: BrokerServer;
let client: NatsConnection;
let jsm: JetStreamManager;
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
  nats = await startNatsServer();
  client = await connect({ servers: nats.url });
  jsm = await jetstreamManager(client);
  await jsm.streams.add({ name: 'ORDERS', subjects: ['outbox.order.>'] });
  await jsm.streams.add({ name: 'ORDERS_DEAD', subjects: ['dead.orders'] });
  [dbA, dbB] = await Promise.all([createTestDatabase(), createTestDatabase()]);
  const sqlB = await dbB.connect();
  await sqlB.query(`CREATE TABLE booked (seq bigserial, event_id uuid, key int, n int)`);
  await sqlB.end();
  serviceA = await createOutboxApp({
    url: dbA.url,
    outbox: { pollIntervalMs: 200 },
    imports: [
      OutboxBridgeModule.forRoot({
        name: 'to-nats',
        events: ['order.placed'],
        ordered: true,
        transport: natsJetStream({ servers: nats.url }),
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
        transport: natsJetStreamInbox({
          servers: nats.url,
          stream: 'ORDERS',
          consumer: 'billing',
          deadLetterSubject: 'dead.orders',
          ackWaitMs: 5000,
        }),
      }),
    ],
  });
}, 60_000);

afterAll(async () => {
  await serviceB?.close();
  await serviceA?.close();
  await client?.close();
  await nats?.remove();
  await Promise.all([dbA?.close(), dbB?.close()]);
});

const booked = `SELECT count(*)::int AS n FROM booked`;

it('books every event of service A once in service B, each key in the order A committed it', async () => {
  const publisher = serviceA.get(OutboxPublisher);
  const dataSource = serviceA.get(DataSource);
  const emitted: string[] = [];
  for (let tx = 0; tx < 100; tx++) {
    const events = Array.from({ length: 20 }, (_, i) => ({
      type: 'order.placed',
      aggregateType: 'order',
      aggregateId: String(i % 7),
      payload: { key: i % 7, n: tx * 100 + i },
    }));
    emitted.push(
      ...(await dataSource.transaction((manager) => publisher.emit(events, { manager }))),
    );
  }
  const sqlB = await dbB.connect();
  try {
    await waitForRows(sqlB, booked, 2000, 120_000);
    const { rows } = await sqlB.query<{ event_id: string; key: number; n: number }>(
      `SELECT event_id, key, n FROM booked ORDER BY seq`,
    );
    expect(new Set(rows.map((r) => r.event_id))).toEqual(new Set(emitted));
    const last = new Map<number, number>();
    for (const row of rows) {
      expect(row.n).toBeGreaterThan(last.get(row.key) ?? -1);
      last.set(row.key, row.n);
    }
    // B's events carry A's ids: the inbox's emit deduplicates on them.
    const { rows: stored } = await sqlB.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM outbox_event WHERE id = ANY($1::uuid[])`,
      [emitted],
    );
    expect(stored[0].n).toBe(2000);
  } finally {
    await sqlB.end();
  }
}, 180_000);

it('books a message the stream holds twice (a republish past its duplicate window) once', async () => {
  const sqlB = await dbB.connect();
  try {
    const before = (await sqlB.query<{ n: number }>(booked)).rows[0].n;
    const [first] = await readStream(jsm, 'ORDERS');
    const js = jetstream(client);
    const copy = headers();
    for (const [name, value] of Object.entries(first.headers)) {
      if (name !== 'nats-msg-id') copy.set(name, value as string);
    }
    // A new Nats-Msg-Id: past the stream's window, the republish is stored again.
    await js.publish('outbox.order.placed', JSON.stringify(first.payload), {
      headers: copy,
      msgID: `${first.id}-again`,
    });
    const inbox = serviceB.get<OutboxInbox>(getOutboxInboxToken('from-orders'));
    const duplicates = inbox.receiver.counts.duplicates;
    for (let i = 0; i < 100 && inbox.receiver.counts.duplicates === duplicates; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(inbox.receiver.counts.duplicates).toBe(duplicates + 1);
    await new Promise((r) => setTimeout(r, 500));
    expect((await sqlB.query<{ n: number }>(booked)).rows[0].n).toBe(before);
    expect(first.headers[RELAY_HEADERS.id]).toBe(first.id);
  } finally {
    await sqlB.end();
  }
});

it('rejects a message that is not JSON to the dead-letter subject with the reason, and nothing of it in B', async () => {
  const js = jetstream(client);
  const h = headers();
  h.set(RELAY_HEADERS.type, 'order.placed');
  h.set(RELAY_HEADERS.aggregateType, 'order');
  h.set(RELAY_HEADERS.aggregateId, '1');
  h.set('authorization', 'Bearer s3cr3t-t0ken');
  await js.publish('outbox.order.placed', 'password=hunter2 {not json', {
    headers: h,
    msgID: 'not-json-1',
  });
  for (let i = 0; i < 100 && (await jsm.streams.info('ORDERS_DEAD')).state.messages === 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
  }
  const [dead] = await readStream(jsm, 'ORDERS_DEAD');
  expect(dead.headers['outbox-reject-reason']).toBe('the body is not JSON (26 bytes)');
  expect(dead.headers[RELAY_HEADERS.type]).toBe('order.placed');
  expect(dead.payload).toMatchObject({ text: 'password=hunter2 {not json' });
  const sqlB = await dbB.connect();
  const { rows } = await sqlB.query(
    `SELECT id FROM outbox_event WHERE payload::text LIKE '%hunter2%'`,
  );
  await sqlB.end();
  expect(rows).toEqual([]);
});
