import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Discarded dead letters: `discarded_at` and `discard_reason`, set by `OutboxAdmin.discard`. A
 * discarded event is never replayed and is deleted by the retention sweep once it has been kept
 * for `retention.discardedRetentionMs`.
 *
 * The dead replay index leaves discarded rows out (`outbox_event_dead_retry_idx`, replacing
 * `outbox_event_dead_due_idx`), so claims and the health probe never walk them however many
 * pile up; dead letters are listed newest first through `outbox_event_dead_idx`, and the sweep
 * finds discarded rows through `outbox_event_discarded_idx`.
 *
 * The columns are nullable without a default: PostgreSQL adds them without rewriting the table,
 * under a lock held only as long as the migration's transaction. The index builds in that
 * transaction read the whole table, and writes wait for them: on a big table, prepare while the
 * previous version runs, in this order, `ALTER TABLE outbox_event ADD COLUMN IF NOT EXISTS
 * discarded_at timestamptz, ADD COLUMN IF NOT EXISTS discard_reason text`, then each index below
 * with `CREATE INDEX CONCURRENTLY IF NOT EXISTS`; this migration then finds them and only drops
 * the old index. The previous version keeps claiming and settling against the new schema (it
 * ignores the columns), but it knows neither discards nor replays of chosen handlers: start
 * using those once every instance runs this version.
 */
export class OutboxDiscard1768000000000 implements MigrationInterface {
  name = 'OutboxDiscard1768000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE outbox_event
        ADD COLUMN IF NOT EXISTS discarded_at timestamptz,
        ADD COLUMN IF NOT EXISTS discard_reason text
    `);
    await queryRunner.query(`
      CREATE INDEX IF NOT EXISTS outbox_event_dead_retry_idx ON outbox_event (next_attempt_at, id)
      WHERE dispatched_at IS NULL AND dead_at IS NOT NULL AND discarded_at IS NULL
    `);
    await queryRunner.query(`
      CREATE INDEX IF NOT EXISTS outbox_event_dead_idx ON outbox_event (dead_at, id)
      WHERE dispatched_at IS NULL AND dead_at IS NOT NULL
    `);
    await queryRunner.query(`
      CREATE INDEX IF NOT EXISTS outbox_event_discarded_idx ON outbox_event (discarded_at)
      WHERE dispatched_at IS NULL AND discarded_at IS NOT NULL
    `);
    await queryRunner.query(`DROP INDEX IF EXISTS outbox_event_dead_due_idx`);
  }

  /**
   * Restores the previous dead index. Discarded rows become plain dead rows again (the previous
   * version has no discard).
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
      CREATE INDEX outbox_event_dead_due_idx ON outbox_event (next_attempt_at, id)
      WHERE dispatched_at IS NULL AND dead_at IS NOT NULL
    `);
    await queryRunner.query(`DROP INDEX outbox_event_discarded_idx`);
    await queryRunner.query(`DROP INDEX outbox_event_dead_idx`);
    await queryRunner.query(`DROP INDEX outbox_event_dead_retry_idx`);
    await queryRunner.query(`
      ALTER TABLE outbox_event DROP COLUMN discard_reason, DROP COLUMN discarded_at
    `);
  }
}
