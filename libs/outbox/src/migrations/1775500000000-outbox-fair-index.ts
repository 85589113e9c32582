import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndex, dropIndex } from './concurrent-index';

/**
 * `outbox_event_fair_idx`: the first tries waiting for a claim, by partition then due order
 * (see `OutboxFairClaims1775000000000`). A fair claim walks it one probe per partition with
 * work, then reads each due partition's share from it. Partial: leased, failed, parked and
 * settled events are not in it, so its size follows the events waiting for their first claim.
 *
 * Built in the migration's transaction when TypeORM runs it in one, concurrently outside one
 * (`concurrent-index.ts`), while emits and settles go on. An index a failed run left invalid is
 * rebuilt. The previous version never reads it.
 */
export class OutboxFairIndex1775500000000 implements MigrationInterface {
  name = 'OutboxFairIndex1775500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await createIndex(
      queryRunner,
      'outbox_event_fair_idx',
      `ON outbox_event ((coalesce(partition_key, organization_id, '')), next_attempt_at, id)
       WHERE dispatched_at IS NULL AND dead_at IS NULL AND lease_expires_at IS NULL
         AND failures = '{}' AND next_attempt_at < timestamptz '9999-12-31 00:00:00+00'`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await dropIndex(queryRunner, 'outbox_event_fair_idx');
  }
}
