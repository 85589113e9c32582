import { type MigrationInterface } from 'typeorm';
import {
  OutboxDiscardIndexes1768500000000,
  OutboxOrderingIndexes1773500000000,
  OutboxOrganizationTypeIndex1770000000000,
} from '@app/outbox';
import { insertEvent, waitForLockWait } from './support/index-build-probe';
import { migratedIndexes } from './support/schema-catalog';
import { useTestDatabase } from './support/test-database';

/**
 * Outside a transaction, the migrations that build indexes on outbox_event build them
 * concurrently: emits go on during a build, and a build a failure left INVALID is rebuilt by the
 * next run rather than skipped by IF NOT EXISTS. (Each mode and entry point:
 * outbox-migration-modes.spec.ts.)
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

describe('the index migrations', () => {
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
    await waitForLockWait(t.sql, '%outbox_event_organization_type_idx%');

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
