import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `ordering_key`: the key an emitter gave an event to order it by (`NewOutboxEvent.orderingKey`),
 * null for the events ordered by their aggregate. Nullable without a default, so adding it
 * rewrites nothing and takes its lock for an instant; the previous version never reads it, and
 * its enqueue leaves it null.
 */
export class OutboxOrderingKey1773000000000 implements MigrationInterface {
  name = 'OutboxOrderingKey1773000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE outbox_event ADD COLUMN IF NOT EXISTS ordering_key text`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE outbox_event DROP COLUMN IF EXISTS ordering_key`);
  }
}
