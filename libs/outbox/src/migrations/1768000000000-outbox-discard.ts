import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Discarded dead letters: `discarded_at` and `discard_reason`, set by `OutboxAdmin.discard`. A
 * discarded event is never replayed and is deleted by the retention sweep once it has been kept
 * for `retention.discardedRetentionMs`. Their indexes are built concurrently by the next
 * migration (`OutboxDiscardIndexes1768500000000`).
 *
 * The columns are nullable without a default: PostgreSQL adds them without rewriting the table,
 * under a lock held only as long as the migration's transaction. The previous version keeps
 * claiming and settling against the new schema (it ignores the columns), but it knows neither
 * discards nor replays of chosen handlers: start using those once every instance runs this
 * version.
 */
export class OutboxDiscard1768000000000 implements MigrationInterface {
  name = 'OutboxDiscard1768000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE outbox_event
        ADD COLUMN IF NOT EXISTS discarded_at timestamptz,
        ADD COLUMN IF NOT EXISTS discard_reason text
    `);
  }

  /**
   * Discarded rows become plain dead rows again (the previous version has no discard); the
   * previous dead index is restored by the next migration's `down()`, which runs first.
   */
  async down(queryRunner: QueryRunner): Promise<void> {
    // Rows waiting for a replay (automatic replays off, or discarded) go back to the previous
    // version's rule: a replay 6 hours after their death.
    await queryRunner.query(`
      UPDATE outbox_event
      SET next_attempt_at = coalesce(dead_at, now()) + interval '6 hours'
      WHERE dispatched_at IS NULL
        AND next_attempt_at >= timestamptz '9999-12-31 00:00:00+00'
    `);
    await queryRunner.query(`
      ALTER TABLE outbox_event DROP COLUMN discard_reason, DROP COLUMN discarded_at
    `);
  }
}
