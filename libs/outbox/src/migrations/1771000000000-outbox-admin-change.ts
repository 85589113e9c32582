import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `outbox_admin_change`: the claim of the replay or discard by filter that runs now. A change by
 * filter inserts its row before its first batch and deletes it when it ends; a second one finds
 * the row and is refused, whichever process it runs in (two dashboard pods, the command and a
 * pod). A table row rather than an advisory lock: a session lock is unsafe behind a pooler in
 * transaction mode (PgBouncer), and a transaction lock would cover one batch, not the whole
 * change. `expires_at` frees the claim of a process that died mid-change. A small table of its
 * own, at most one row per `scope`; the previous version never reads it.
 */
export class OutboxAdminChange1771000000000 implements MigrationInterface {
  name = 'OutboxAdminChange1771000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS outbox_admin_change (
        scope       text        PRIMARY KEY,
        change_id   uuid        NOT NULL,
        kind        text        NOT NULL,
        actor       text,
        selection   jsonb       NOT NULL,
        started_at  timestamptz NOT NULL DEFAULT now(),
        expires_at  timestamptz NOT NULL
      )
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE outbox_admin_change`);
  }
}
