import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndex, dropIndex } from './concurrent-index';

/**
 * `outbox_event_organization_type_idx (organization_id, type, occurred_at, id)`: what
 * `OutboxAdmin.events` reads when an app lists its events of given types in one organization,
 * newest first, one page at a time (the reference app's webhook deliveries). Without it each
 * page reads the whole table, delivered rows included. Events without an organization are left
 * out: no lookup needs them there, and a claim, which never names an organization, cannot take
 * this index for its due index (PostgreSQL 18's skip scan would otherwise consider it for a
 * claim by type).
 *
 * Built in the migration's transaction when TypeORM runs it in one, concurrently outside one
 * (`concurrent-index.ts`), while emits go on; a run that failed halfway rebuilds the invalid
 * index it left. The previous version runs unchanged meanwhile: it never reads it.
 */
export class OutboxOrganizationTypeIndex1770000000000 implements MigrationInterface {
  name = 'OutboxOrganizationTypeIndex1770000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await createIndex(
      queryRunner,
      'outbox_event_organization_type_idx',
      `ON outbox_event (organization_id, type, occurred_at, id) WHERE organization_id IS NOT NULL`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await dropIndex(queryRunner, 'outbox_event_organization_type_idx');
  }
}
