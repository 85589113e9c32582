import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * One due time per row: `next_attempt_at` becomes the time every unsettled row is next claimable
 * (the lease end while claimed, the replay time of a dead row), and claims and plans read it
 * through partial indexes instead of walking every undelivered row.
 *
 * Upgrades a table made by `CreateOutboxEvent1764400000000` in place: a live row under a lease is
 * due when its lease ends, and a dead row is due 6 hours after its dead time, the default
 * `deadRetryMs` (a deployment with another value reaches it after each row's next replay). Stop
 * the relays of the previous version first: their claim leaves `next_attempt_at` behind the
 * lease, which the new claim no longer checks.
 *
 * The indexes are built with plain CREATE INDEX, because TypeORM runs a migration in a
 * transaction, and that blocks writes to the table while they build. On a big table, build them
 * beforehand, while the previous version still runs, with `CREATE INDEX CONCURRENTLY IF NOT
 * EXISTS` and the same names and definitions as below: this migration then finds them and skips
 * the builds, leaving it the two UPDATEs (which touch only leased and dead rows) and the drops.
 */
export class OutboxDueIndex1765000000000 implements MigrationInterface {
  name = 'OutboxDueIndex1765000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      UPDATE outbox_event
      SET next_attempt_at = greatest(next_attempt_at, lease_expires_at)
      WHERE dispatched_at IS NULL
        AND dead_at IS NULL
        AND lease_expires_at IS NOT NULL
    `);
    // 6 hours: the default deadRetryMs. greatest() ignores a NULL lease; a dead row under a
    // lease (a replay in flight) is, like a live one, due again when its lease ends.
    await queryRunner.query(`
      UPDATE outbox_event
      SET next_attempt_at = greatest(dead_at + interval '6 hours', lease_expires_at)
      WHERE dispatched_at IS NULL
        AND dead_at IS NOT NULL
    `);
    await queryRunner.query(`
      CREATE INDEX IF NOT EXISTS outbox_event_due_idx ON outbox_event (next_attempt_at, id)
      WHERE dispatched_at IS NULL AND dead_at IS NULL
    `);
    await queryRunner.query(`
      CREATE INDEX IF NOT EXISTS outbox_event_dead_due_idx ON outbox_event (next_attempt_at, id)
      WHERE dispatched_at IS NULL AND dead_at IS NOT NULL
    `);
    await queryRunner.query(`
      CREATE INDEX IF NOT EXISTS outbox_event_leased_idx ON outbox_event (lease_expires_at)
      WHERE dispatched_at IS NULL AND lease_expires_at IS NOT NULL
    `);
    await queryRunner.query(`DROP INDEX IF EXISTS outbox_event_pending_idx`);
    await queryRunner.query(`DROP INDEX IF EXISTS outbox_event_dead_idx`);
  }

  /**
   * Restores the previous indexes. The due times written stay: the previous claim checks the
   * lease itself and times dead replays from `dead_at`.
   */
  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE INDEX outbox_event_pending_idx ON outbox_event (occurred_at, id)
      WHERE dispatched_at IS NULL AND dead_at IS NULL
    `);
    await queryRunner.query(`
      CREATE INDEX outbox_event_dead_idx ON outbox_event (dead_at, id)
      WHERE dispatched_at IS NULL AND dead_at IS NOT NULL
    `);
    await queryRunner.query(`DROP INDEX outbox_event_leased_idx`);
    await queryRunner.query(`DROP INDEX outbox_event_dead_due_idx`);
    await queryRunner.query(`DROP INDEX outbox_event_due_idx`);
  }
}
