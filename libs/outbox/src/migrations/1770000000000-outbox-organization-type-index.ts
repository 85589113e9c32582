import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `outbox_event_organization_type_idx (organization_id, type, occurred_at, id)`: what
 * `OutboxAdmin.events` reads when an app lists its events of given types in one organization,
 * newest first, one page at a time (the reference app's webhook deliveries). Without it each
 * page reads the whole table, delivered rows included. Events without an organization are left
 * out: no lookup needs them there, and a claim, which never names an organization, cannot take
 * this index for its due index (PostgreSQL 18's skip scan would otherwise consider it for a
 * claim by type).
 *
 * The build runs in the migration's transaction, like the other migrations', so it works under
 * TypeORM's default `migrationsTransactionMode`; it reads the whole table, and emits wait for it.
 * On a big table, build it first while the previous version runs, with
 * `CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_event_organization_type_idx ON outbox_event
 * (organization_id, type, occurred_at, id) WHERE organization_id IS NOT NULL`; this migration
 * then finds it and does nothing. The previous version runs unchanged meanwhile: it never reads
 * the index.
 */
export class OutboxOrganizationTypeIndex1770000000000 implements MigrationInterface {
  name = 'OutboxOrganizationTypeIndex1770000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE INDEX IF NOT EXISTS outbox_event_organization_type_idx
      ON outbox_event (organization_id, type, occurred_at, id)
      WHERE organization_id IS NOT NULL
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX IF EXISTS outbox_event_organization_type_idx`);
  }
}
