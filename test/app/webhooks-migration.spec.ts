import { randomUUID } from 'node:crypto';
import { DataSource, type MigrationInterface } from 'typeorm';
import { CreateReferenceApp1764500000000, WebhooksOnOutbox1766500000000 } from '../../migrations';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

/**
 * The upgrade that moves webhooks onto the outbox: deliveries still pending in the old
 * `webhook_delivery` table become `webhook.delivery` events, so none is lost.
 */

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase();
});

afterAll(async () => {
  await db?.close();
});

async function migrate(migrations: (new () => MigrationInterface)[]): Promise<void> {
  const dataSource = new DataSource({ type: 'postgres', url: db.url, migrations, logging: false });
  await dataSource.initialize();
  try {
    await dataSource.runMigrations({ transaction: 'each' });
  } finally {
    await dataSource.destroy();
  }
}

it('carries pending deliveries over as webhook.delivery events and drops the table', async () => {
  await migrate([CreateReferenceApp1764500000000]);
  const sql = await db.connect();
  const organizationId = randomUUID();
  const endpointId = randomUUID();
  const [pendingEvent, deliveredEvent] = [randomUUID(), randomUUID()];
  await sql.query(`INSERT INTO organization (id, name) VALUES ($1, 'Old')`, [organizationId]);
  await sql.query(
    `INSERT INTO webhook_endpoint (id, organization_id, url, secret, event_types)
     VALUES ($1, $2, 'http://127.0.0.1:1/hook', 'whsec_x', '{invoice.paid}')`,
    [endpointId, organizationId],
  );
  const body = { type: 'invoice.paid', timestamp: '2026-01-01T00:00:00.000Z', data: { n: 1 } };
  await sql.query(
    `INSERT INTO webhook_delivery
       (id, endpoint_id, event_id, event_type, organization_id, body, attempts, delivered_at)
     VALUES ($1::text || ':' || $2::text, $2::uuid, $1::uuid, 'invoice.paid', $3, $4, 2, NULL),
            ($5::text || ':' || $2::text, $2::uuid, $5::uuid, 'invoice.paid', $3, $4, 1, now())`,
    [pendingEvent, endpointId, organizationId, JSON.stringify(body), deliveredEvent],
  );

  await migrate([CreateReferenceApp1764500000000, WebhooksOnOutbox1766500000000]);

  const { rows } = await sql.query(
    `SELECT type, aggregate_type, aggregate_id, organization_id, payload, causation_id,
            correlation_id, next_attempt_at <= now() AS due, dispatched_at
     FROM outbox_event`,
  );
  expect(rows).toEqual([
    {
      type: 'webhook.delivery',
      aggregate_type: 'webhook_endpoint',
      aggregate_id: endpointId,
      organization_id: organizationId,
      payload: { endpointId, eventId: pendingEvent, eventType: 'invoice.paid', body },
      causation_id: pendingEvent,
      correlation_id: pendingEvent,
      due: true,
      dispatched_at: null,
    },
  ]);
  const { rows: tables } = await sql.query(`SELECT to_regclass('webhook_delivery') AS t`);
  expect(tables).toEqual([{ t: null }]);
  await sql.end();
});
