import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndex, dropIndex } from './concurrent-index';

/**
 * The per-key ordering's indexes (see `OutboxOrdering1773000000000`), built concurrently:
 * `outbox_event_ordering_idx`, the events of a key not yet done in place order;
 * `outbox_event_blocked_idx`, the blocked keys' dead heads; `outbox_event_ordered_retry_idx`,
 * the live events an ordered handler retries. All partial, on columns only ordered handlers set,
 * but each build still reads the whole table.
 *
 * Built in the migration's transaction when TypeORM runs it in one, concurrently outside one
 * (`concurrent-index.ts`), while emits and settles go on. An index a failed run left invalid is
 * rebuilt, so a run that stopped halfway completes when run again. The previous version never
 * reads them.
 */
export class OutboxOrderingIndexes1773500000000 implements MigrationInterface {
  name = 'OutboxOrderingIndexes1773500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await createIndex(
      queryRunner,
      'outbox_event_ordering_idx',
      `ON outbox_event (ordering_key, ordering_position)
       WHERE ordering_position IS NOT NULL AND dispatched_at IS NULL AND discarded_at IS NULL`,
    );
    await createIndex(
      queryRunner,
      'outbox_event_blocked_idx',
      `ON outbox_event (dead_at, id)
       WHERE dispatched_at IS NULL AND dead_at IS NOT NULL AND discarded_at IS NULL
         AND ordered_for <> '{}'`,
    );
    await createIndex(
      queryRunner,
      'outbox_event_ordered_retry_idx',
      `ON outbox_event (occurred_at)
       WHERE dispatched_at IS NULL AND dead_at IS NULL AND failures ?| ordered_for`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await dropIndex(queryRunner, 'outbox_event_ordered_retry_idx');
    await dropIndex(queryRunner, 'outbox_event_blocked_idx');
    await dropIndex(queryRunner, 'outbox_event_ordering_idx');
  }
}
