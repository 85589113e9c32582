import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexConcurrently, dropIndexOnRevert } from './concurrent-index';

/**
 * The per-key ordering's indexes (see `OutboxOrdering1773000000000`), built concurrently:
 * `outbox_event_ordering_idx`, the events of a key not yet done in place order;
 * `outbox_event_blocked_idx`, the blocked keys' dead heads; `outbox_event_ordered_retry_idx`,
 * the live events an ordered handler retries. All partial, on columns only ordered handlers set,
 * but each build still reads the whole table.
 *
 * `transaction = false`, as PostgreSQL builds an index concurrently only outside a transaction:
 * emits and settles go on meanwhile. TypeORM then needs `migrationsTransactionMode: 'each'` (its
 * default, 'all', refuses to start). An index a failed run left invalid is rebuilt, so a run that
 * stopped halfway completes when run again. The previous version never reads them.
 */
export class OutboxOrderingIndexes1773500000000 implements MigrationInterface {
  name = 'OutboxOrderingIndexes1773500000000';
  transaction = false;

  async up(queryRunner: QueryRunner): Promise<void> {
    await createIndexConcurrently(
      queryRunner,
      'outbox_event_ordering_idx',
      `ON outbox_event (ordering_key, ordering_position)
       WHERE ordering_position IS NOT NULL AND dispatched_at IS NULL AND discarded_at IS NULL`,
    );
    await createIndexConcurrently(
      queryRunner,
      'outbox_event_blocked_idx',
      `ON outbox_event (dead_at, id)
       WHERE dispatched_at IS NULL AND dead_at IS NOT NULL AND discarded_at IS NULL
         AND ordered_for <> '{}'`,
    );
    await createIndexConcurrently(
      queryRunner,
      'outbox_event_ordered_retry_idx',
      `ON outbox_event (occurred_at)
       WHERE dispatched_at IS NULL AND dead_at IS NULL AND failures ?| ordered_for`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await dropIndexOnRevert(queryRunner, 'outbox_event_ordered_retry_idx');
    await dropIndexOnRevert(queryRunner, 'outbox_event_blocked_idx');
    await dropIndexOnRevert(queryRunner, 'outbox_event_ordering_idx');
  }
}
