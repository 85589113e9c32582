import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import {
  DataSource,
  ForbiddenTransactionModeOverrideError,
  type MigrationInterface,
} from 'typeorm';
import {
  OUTBOX_MIGRATIONS,
  OutboxDiscardIndexes1768500000000,
  OutboxOrderingIndexes1773500000000,
  OutboxOrganizationTypeIndex1770000000000,
} from '@app/outbox';
import { dropDatabase, withAdminClient } from './support/admin-client';
import { withDatabase } from './support/database-url';
import { migratedIndexes } from './support/schema-catalog';
import { useTestDatabase } from './support/test-database';
import { ADMIN_URL_ENV, TEMPLATE_ENV, requireRunEnv } from './support/test-run';

/**
 * The migrations that build indexes on outbox_event build them concurrently, outside a
 * transaction: emits go on during a build, and a build a failure left INVALID is rebuilt by the
 * next run rather than skipped by IF NOT EXISTS.
 */

const t = useTestDatabase();

const INDEX_MIGRATIONS: (new () => MigrationInterface)[] = [
  OutboxDiscardIndexes1768500000000,
  OutboxOrganizationTypeIndex1770000000000,
  OutboxOrderingIndexes1773500000000,
];

/** The indexes those migrations build. */
const BUILT = [
  'outbox_event_blocked_idx',
  'outbox_event_dead_idx',
  'outbox_event_dead_retry_idx',
  'outbox_event_discarded_idx',
  'outbox_event_ordered_retry_idx',
  'outbox_event_ordering_idx',
  'outbox_event_organization_type_idx',
];

async function up(...migrations: (new () => MigrationInterface)[]): Promise<void> {
  const runner = t.db.dataSource.createQueryRunner();
  try {
    for (const Migration of migrations) await new Migration().up(runner);
  } finally {
    await runner.release();
  }
}

async function down(...migrations: (new () => MigrationInterface)[]): Promise<void> {
  const runner = t.db.dataSource.createQueryRunner();
  try {
    for (const Migration of [...migrations].reverse()) await new Migration().down(runner);
  } finally {
    await runner.release();
  }
}

/** Index name → valid, for the table's indexes (invalid ones included). */
async function validity(): Promise<Record<string, boolean>> {
  const { rows } = await t.sql.query<{ name: string; valid: boolean }>(
    `SELECT i.relname AS name, x.indisvalid AS valid
       FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
      WHERE x.indrelid = 'outbox_event'::regclass
      ORDER BY i.relname`,
  );
  return Object.fromEntries(rows.map(({ name, valid }) => [name, valid]));
}

/** Waits until a session of the database runs a statement matching `pattern` and waits on a lock. */
async function waitForLockWait(pattern: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const { rows } = await t.sql.query(
      `SELECT 1 FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE $1`,
      [pattern],
    );
    if (rows.length > 0) return;
    if (Date.now() > deadline) throw new Error(`no session waits on a lock for ${pattern}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function insertEvent(client: Client, type: string): Promise<void> {
  await client.query(
    `INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload, organization_id)
     VALUES (gen_random_uuid(), $1, 'a', '1', '{}', 'org')`,
    [type],
  );
}

describe('the index migrations', () => {
  it('run outside a transaction: mode "all" refuses them before applying anything; they revert in a transaction or none', async () => {
    for (const Migration of INDEX_MIGRATIONS) expect(new Migration().transaction).toBe(false);

    const adminUrl = requireRunEnv(ADMIN_URL_ENV);
    const name = `${requireRunEnv(TEMPLATE_ENV)}_${randomBytes(4).toString('hex')}`;
    await withAdminClient(adminUrl, (client) =>
      client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`),
    );
    try {
      const dataSource = new DataSource({
        type: 'postgres',
        url: withDatabase(adminUrl, name),
        migrations: OUTBOX_MIGRATIONS,
        logging: false,
      });
      await dataSource.initialize();
      try {
        await expect(dataSource.runMigrations({ transaction: 'all' })).rejects.toBeInstanceOf(
          ForbiddenTransactionModeOverrideError,
        );
        const { present } = (
          await dataSource.query(`SELECT to_regclass('outbox_event') IS NOT NULL AS present`)
        )[0];
        expect(present).toBe(false);
        // Mode 'each' applies them all.
        const applied = await dataSource.runMigrations({ transaction: 'each' });
        expect(applied).toHaveLength(OUTBOX_MIGRATIONS.length);
        const migrated = await migratedIndexes(dataSource, 'outbox_event');

        // TypeORM's revert runs down() in a transaction unless told 'none', whatever the
        // migration's `transaction`: both revert the index migrations, and up() again.
        const since =
          OUTBOX_MIGRATIONS.length - OUTBOX_MIGRATIONS.indexOf(OutboxDiscardIndexes1768500000000);
        for (const transaction of ['all', 'none'] as const) {
          for (let i = 0; i < since; i++) await dataSource.undoLastMigration({ transaction });
          const reverted = await migratedIndexes(dataSource, 'outbox_event');
          expect(Object.keys(reverted)).toContain('outbox_event_dead_due_idx');
          for (const name of BUILT) expect(Object.keys(reverted)).not.toContain(name);
          await dataSource.runMigrations({ transaction: 'each' });
          expect(await migratedIndexes(dataSource, 'outbox_event')).toEqual(migrated);
        }
      } finally {
        await dataSource.destroy();
      }
    } finally {
      await withAdminClient(adminUrl, (client) => dropDatabase(client, name));
    }
  });

  it('rebuild the indexes an interrupted concurrent build left invalid', async () => {
    const before = await migratedIndexes(t.db.dataSource, 'outbox_event');
    await down(...INDEX_MIGRATIONS);
    // Each build interrupted as a deploy job's can be: a concurrent build that cannot wait for a
    // writer's open transaction past its lock_timeout fails and leaves its index INVALID.
    const writer = await t.db.connect();
    const builder = await t.db.connect();
    await writer.query('BEGIN');
    await insertEvent(writer, 'open.writer');
    await builder.query(`SET lock_timeout = '100ms'`);
    for (const name of BUILT) {
      const definition = before[name].replace(/^CREATE INDEX /, 'CREATE INDEX CONCURRENTLY ');
      await expect(builder.query(definition)).rejects.toThrow(/lock timeout/);
    }
    await writer.query('ROLLBACK');
    const invalid = await validity();
    for (const name of BUILT) expect(invalid[name]).toBe(false);

    await up(...INDEX_MIGRATIONS);

    expect(await migratedIndexes(t.db.dataSource, 'outbox_event')).toEqual(before);
    const stillInvalid = Object.entries(await validity()).filter(([, valid]) => !valid);
    expect(stillInvalid.map(([name]) => name)).toEqual([]);
  });

  it('let emits commit while a build waits for an older transaction', async () => {
    await down(OutboxOrganizationTypeIndex1770000000000);
    const older = await t.db.connect();
    const emitter = await t.db.connect();
    await older.query('BEGIN');
    await insertEvent(older, 'older.transaction');
    const build = up(OutboxOrganizationTypeIndex1770000000000);
    let built = false;
    void build.then(
      () => (built = true),
      () => undefined,
    );
    await waitForLockWait('%outbox_event_organization_type_idx%');

    // A build that held writes (a plain CREATE INDEX) would make this insert wait past its
    // lock_timeout.
    await emitter.query(`SET lock_timeout = '2s'`);
    await insertEvent(emitter, 'during.build');
    expect(built).toBe(false);

    await older.query('COMMIT');
    await build;
    expect((await validity()).outbox_event_organization_type_idx).toBe(true);
  });
});
