import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndex, dropIndex } from './concurrent-index';

/**
 * The indexes of discarded dead letters, built concurrently: the dead replay index leaves
 * discarded rows out (`outbox_event_dead_retry_idx`, replacing `outbox_event_dead_due_idx`), so
 * claims and the health probe never walk them however many pile up; dead letters are listed
 * newest first through `outbox_event_dead_idx`, and the sweep finds discarded rows through
 * `outbox_event_discarded_idx`.
 *
 * Built in the migration's transaction when TypeORM runs it in one, concurrently outside one
 * (`concurrent-index.ts`): each concurrent build reads the whole table while emits and settles go
 * on. Each statement is idempotent, and an index a failed run left invalid is rebuilt, so a run
 * that stopped halfway completes when run again.
 *
 * The old index is dropped once the new ones are valid. The previous version's SQL is unchanged,
 * though its claim of due dead rows (which does not name `discarded_at`, so cannot take
 * `outbox_event_dead_retry_idx`) loses the index made for it, until the pods are rolled.
 */
export class OutboxDiscardIndexes1768500000000 implements MigrationInterface {
  name = 'OutboxDiscardIndexes1768500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await createIndex(
      queryRunner,
      'outbox_event_dead_retry_idx',
      `ON outbox_event (next_attempt_at, id)
       WHERE dispatched_at IS NULL AND dead_at IS NOT NULL AND discarded_at IS NULL`,
    );
    await createIndex(
      queryRunner,
      'outbox_event_dead_idx',
      `ON outbox_event (dead_at, id) WHERE dispatched_at IS NULL AND dead_at IS NOT NULL`,
    );
    await createIndex(
      queryRunner,
      'outbox_event_discarded_idx',
      `ON outbox_event (discarded_at) WHERE dispatched_at IS NULL AND discarded_at IS NOT NULL`,
    );
    await dropIndex(queryRunner, 'outbox_event_dead_due_idx');
  }

  /** Restores the previous dead index before dropping the new ones. */
  async down(queryRunner: QueryRunner): Promise<void> {
    await createIndex(
      queryRunner,
      'outbox_event_dead_due_idx',
      `ON outbox_event (next_attempt_at, id) WHERE dispatched_at IS NULL AND dead_at IS NOT NULL`,
    );
    await dropIndex(queryRunner, 'outbox_event_discarded_idx');
    await dropIndex(queryRunner, 'outbox_event_dead_idx');
    await dropIndex(queryRunner, 'outbox_event_dead_retry_idx');
  }
}
