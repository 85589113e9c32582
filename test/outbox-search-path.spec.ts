import { Injectable, type INestApplication } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { DataSource } from 'typeorm';
import { Client } from 'pg';
import {
  OnOutboxEvent,
  OUTBOX_ENTITIES,
  OUTBOX_MIGRATIONS,
  OutboxPublisher,
  type OutboxEvent,
} from '@app/outbox';
import { dropDatabase, withAdminClient } from './support/admin-client';
import { withDatabase } from './support/database-url';
import { invoicePaid } from './support/events';
import { createOutboxApp, eventually } from './support/outbox-app';
import { ADMIN_URL_ENV, TEMPLATE_ENV, requireRunEnv } from './support/test-run';

/**
 * The table in a schema of the app's choice, as the README describes it: the schema first in
 * the database's search_path before the migrations run; the outbox then works there, end to end.
 */

const delivered: string[] = [];

@Injectable()
class Recorder {
  @OnOutboxEvent('recorder', { events: '*' })
  handle(event: OutboxEvent) {
    delivered.push(event.id);
  }
}

const adminUrl = () => requireRunEnv(ADMIN_URL_ENV);
// Named after the run's template so that global teardown drops it if this file crashes.
const name = `${requireRunEnv(TEMPLATE_ENV)}_sp_${randomBytes(4).toString('hex')}`;
let app: INestApplication | undefined;

beforeAll(async () => {
  await withAdminClient(adminUrl(), async (client) => {
    await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  });
  const url = withDatabase(adminUrl(), name);
  const setup = new Client({ connectionString: url });
  await setup.connect();
  try {
    await setup.query('CREATE SCHEMA infra');
    await setup.query(
      `ALTER DATABASE ${setup.escapeIdentifier(name)} SET search_path = infra, public`,
    );
  } finally {
    await setup.end();
  }
  const migrator = new DataSource({
    type: 'postgres',
    url,
    entities: [...OUTBOX_ENTITIES],
    migrations: [...OUTBOX_MIGRATIONS],
  });
  await migrator.initialize();
  try {
    await migrator.runMigrations({ transaction: 'each' });
  } finally {
    await migrator.destroy();
  }
});

afterAll(async () => {
  await app?.close();
  await withAdminClient(adminUrl(), (client) => dropDatabase(client, name));
});

it('creates the table in the schema first in search_path and delivers through it', async () => {
  const url = withDatabase(adminUrl(), name);
  app = await createOutboxApp({
    url,
    providers: [Recorder],
  });
  const dataSource = app.get(DataSource);
  const [where] = await dataSource.query(
    `SELECT to_regclass('infra.outbox_event') IS NOT NULL AS in_infra,
            to_regclass('public.outbox_event') IS NOT NULL AS in_public`,
  );
  expect(where).toEqual({ in_infra: true, in_public: false });

  const id = await dataSource.transaction((manager) =>
    app!.get(OutboxPublisher).emit(invoicePaid(), { manager }),
  );
  await eventually('the event is delivered and settled', async () => {
    const [row] = await dataSource.query(
      'SELECT dispatched_at IS NOT NULL AS done FROM infra.outbox_event WHERE id = $1',
      [id],
    );
    return row.done === true;
  });
  expect(delivered).toEqual([id]);
});
