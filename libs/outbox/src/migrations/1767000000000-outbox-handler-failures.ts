import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Per-handler failures, so each handler of an event follows its own retry schedule and attempt
 * limit: `failures` maps a handler name to `{ count, retryAt }` (see `HandlerFailure`). A column
 * with a constant default, which PostgreSQL adds without rewriting the table; rows from before
 * start with no recorded failure, so their next attempt runs every handler not yet delivered.
 */
export class OutboxHandlerFailures1767000000000 implements MigrationInterface {
  name = 'OutboxHandlerFailures1767000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE outbox_event ADD COLUMN failures jsonb NOT NULL DEFAULT '{}'::jsonb`,
    );
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE outbox_event DROP COLUMN failures`);
  }
}
