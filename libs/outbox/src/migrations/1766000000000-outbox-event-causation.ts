import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Causation and correlation, so a chain of events can be followed: `causation_id` is the event
 * whose handler emitted this one, `correlation_id` names the whole chain (the first event's id,
 * or whatever the app set when it emitted it). Both are nullable columns without a default, which
 * PostgreSQL adds without rewriting the table, so this runs while the previous version is up.
 */
export class OutboxEventCausation1766000000000 implements MigrationInterface {
  name = 'OutboxEventCausation1766000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE outbox_event
        ADD COLUMN causation_id uuid,
        ADD COLUMN correlation_id text
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE outbox_event
        DROP COLUMN correlation_id,
        DROP COLUMN causation_id
    `);
  }
}
