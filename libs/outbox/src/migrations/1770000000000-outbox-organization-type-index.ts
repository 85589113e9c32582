import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexConcurrently, dropIndexOnRevert } from './concurrent-index';

/**
 * `outbox_event_organization_type_idx (organization_id, type, occurred_at, id)`: what
 * `OutboxAdmin.events` reads when an app lists its events of given types in one organization,
 * newest first, one page at a time (the reference app's webhook deliveries). Without it each
 * page reads the whole table, delivered rows included. Events without an organization are left
 * out: no lookup needs them there, and a claim, which never names an organization, cannot take
 * this index for its due index (PostgreSQL 18's skip scan would otherwise consider it for a
 * claim by type).
 *
 * Built concurrently, so `transaction = false` (TypeORM then needs `migrationsTransactionMode:
 * 'each'`): it reads the whole table while emits go on, and a run that failed halfway rebuilds
 * the invalid index it left. The previous version runs unchanged meanwhile: it never reads it.
 */
export class OutboxOrganizationTypeIndex1770000000000 implements MigrationInterface {
  name = 'OutboxOrganizationTypeIndex1770000000000';
  transaction = false;

  async up(queryRunner: QueryRunner): Promise<void> {
    await createIndexConcurrently(
      queryRunner,
      'outbox_event_organization_type_idx',
      `ON outbox_event (organization_id, type, occurred_at, id) WHERE organization_id IS NOT NULL`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await dropIndexOnRevert(queryRunner, 'outbox_event_organization_type_idx');
  }
}
