import { OutboxEventEntity } from '../libs/outbox/src/store/outbox-event.entity';
import { OUTBOX_TABLE } from '../libs/outbox/src/outbox.constants';
import { entityDeclarations, migratedChecks, migratedIndexes } from './support/schema-catalog';
import { createTestDatabase, type TestDatabase } from './support/test-database';

/**
 * The migration is the schema; the entity is how TypeORM sees it. Drift between them makes
 * TypeORM plan ALTERs nobody meant, or read the table through the wrong shape.
 */
describe('outbox schema', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });

  afterAll(async () => {
    await db?.close();
  });

  it('leaves TypeORM nothing to change after the migrations', async () => {
    const plan = await db.dataSource.driver.createSchemaBuilder().log();

    // Comparing to [] makes Jest print every pending statement when this fails.
    expect(plan.upQueries.map((query) => query.query)).toEqual([]);
  });

  it('declares in the entity the same partial indexes and CHECK the migration creates', async () => {
    const declared = await entityDeclarations(db.dataSource, OutboxEventEntity);
    const migrated = await migratedIndexes(db.dataSource, OUTBOX_TABLE);

    // The expression index is declared by name alone; its definition is checked below.
    expect(declared.unsynchronized).toEqual(['outbox_event_fair_idx']);
    const { outbox_event_fair_idx: fairIndex, ...columnIndexes } = migrated;
    expect(fairIndex).toBeDefined();
    expect(declared.indexes).toEqual(columnIndexes);
    expect(declared.checks).toEqual(await migratedChecks(db.dataSource, OUTBOX_TABLE));
  });

  it('creates the outbox table with its columns and primary key', async () => {
    const columns = await db.dataSource.query<{ column_name: string }[]>(
      `SELECT column_name FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = $1
        ORDER BY ordinal_position`,
      [OUTBOX_TABLE],
    );
    expect(columns.map((column) => column.column_name)).toEqual([
      'id',
      'type',
      'aggregate_type',
      'aggregate_id',
      'organization_id',
      'request_id',
      'payload',
      'metadata',
      'occurred_at',
      'attempts',
      'lease_expires_at',
      'next_attempt_at',
      'dispatched_at',
      'dead_at',
      'deliveries',
      'last_error',
      'causation_id',
      'correlation_id',
      'failures',
      'discarded_at',
      'discard_reason',
      'ordering_key',
      'ordering_position',
      'ordered_for',
      'partition_key',
    ]);

    const primaryKey = await db.dataSource.query<{ definition: string }[]>(
      `SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint
        WHERE conrelid = $1::regclass AND conname = 'outbox_event_pkey' AND contype = 'p'`,
      [OUTBOX_TABLE],
    );
    expect(primaryKey).toEqual([{ definition: 'PRIMARY KEY (id)' }]);
  });

  it('creates the partial indexes the claim, the plans and the sweep rely on, and the events index', async () => {
    // Full definitions, so a lost WHERE clause or a reordered key fails, not just a missing name.
    expect(await migratedIndexes(db.dataSource, OUTBOX_TABLE)).toEqual({
      outbox_event_dead_idx:
        'CREATE INDEX outbox_event_dead_idx ON outbox_event USING btree (dead_at, id) ' +
        'WHERE ((dispatched_at IS NULL) AND (dead_at IS NOT NULL))',
      outbox_event_dead_retry_idx:
        'CREATE INDEX outbox_event_dead_retry_idx ON outbox_event USING btree (next_attempt_at, id) ' +
        'WHERE ((dispatched_at IS NULL) AND (dead_at IS NOT NULL) AND (discarded_at IS NULL))',
      outbox_event_discarded_idx:
        'CREATE INDEX outbox_event_discarded_idx ON outbox_event USING btree (discarded_at) ' +
        'WHERE ((dispatched_at IS NULL) AND (discarded_at IS NOT NULL))',
      outbox_event_dispatched_idx:
        'CREATE INDEX outbox_event_dispatched_idx ON outbox_event USING btree (dispatched_at) ' +
        'WHERE (dispatched_at IS NOT NULL)',
      outbox_event_due_idx:
        'CREATE INDEX outbox_event_due_idx ON outbox_event USING btree (next_attempt_at, id) ' +
        'WHERE ((dispatched_at IS NULL) AND (dead_at IS NULL))',
      outbox_event_leased_idx:
        'CREATE INDEX outbox_event_leased_idx ON outbox_event USING btree (lease_expires_at) ' +
        'WHERE ((dispatched_at IS NULL) AND (lease_expires_at IS NOT NULL))',
      outbox_event_organization_type_idx:
        'CREATE INDEX outbox_event_organization_type_idx ON outbox_event USING btree ' +
        '(organization_id, type, occurred_at, id) WHERE (organization_id IS NOT NULL)',
      outbox_event_ordering_idx:
        'CREATE INDEX outbox_event_ordering_idx ON outbox_event USING btree ' +
        '(ordering_key, ordering_position) WHERE ((ordering_position IS NOT NULL) AND ' +
        '(dispatched_at IS NULL) AND (discarded_at IS NULL))',
      outbox_event_blocked_idx:
        'CREATE INDEX outbox_event_blocked_idx ON outbox_event USING btree (dead_at, id) ' +
        'WHERE ((dispatched_at IS NULL) AND (dead_at IS NOT NULL) AND (discarded_at IS NULL) ' +
        "AND (ordered_for <> '{}'::text[]))",
      outbox_event_fair_idx:
        'CREATE INDEX outbox_event_fair_idx ON outbox_event USING btree ' +
        "(COALESCE(partition_key, organization_id, ''::text), next_attempt_at, id) " +
        'WHERE ((dispatched_at IS NULL) AND (dead_at IS NULL) AND (lease_expires_at IS NULL) ' +
        "AND (failures = '{}'::jsonb) AND (next_attempt_at < '9999-12-31 00:00:00+00'::timestamp with time zone))",
      outbox_event_ordered_retry_idx:
        'CREATE INDEX outbox_event_ordered_retry_idx ON outbox_event USING btree (occurred_at) ' +
        'WHERE ((dispatched_at IS NULL) AND (dead_at IS NULL) AND (failures ?| ordered_for))',
    });
  });

  it('creates outbox_admin_change, one claim per scope, for the one change by filter that runs', async () => {
    const columns = await db.dataSource.query<{ column_name: string }[]>(
      `SELECT column_name FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = 'outbox_admin_change'
        ORDER BY ordinal_position`,
    );
    expect(columns.map((column) => column.column_name)).toEqual([
      'scope',
      'change_id',
      'kind',
      'actor',
      'selection',
      'started_at',
      'expires_at',
    ]);
    const [primaryKey] = await db.dataSource.query<{ definition: string }[]>(
      `SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint
        WHERE conrelid = 'outbox_admin_change'::regclass AND contype = 'p'`,
    );
    expect(primaryKey).toEqual({ definition: 'PRIMARY KEY (scope)' });
  });

  it('creates the CHECK that keeps deliveries a JSON object, and it rejects an array', async () => {
    expect(await migratedChecks(db.dataSource, OUTBOX_TABLE)).toEqual({
      outbox_event_deliveries_is_object: "CHECK ((jsonb_typeof(deliveries) = 'object'::text))",
    });

    // The catalog says the CHECK exists; this says it bites.
    await expect(
      db.dataSource.query(
        `INSERT INTO ${OUTBOX_TABLE} (id, type, aggregate_type, aggregate_id, payload, deliveries)
         VALUES (gen_random_uuid(), 't', 'a', '1', '{}', '[]')`,
      ),
    ).rejects.toThrow(/outbox_event_deliveries_is_object/);
  });
});
