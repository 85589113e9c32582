import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Per-key ordering:
 * - `outbox_event.ordering_key`: the key an emitter gave an event (`NewOutboxEvent.orderingKey`),
 *   null for the events ordered by their aggregate until an ordered handler receives one: then
 *   the key it is ordered by, written in full; `ordering_position`: the event's place in its
 *   key, set only for events an ordered handler receives; `ordered_for`: those handlers.
 *   `outbox_event_ordering_idx` finds the events of a key not yet done, in place order: what a
 *   claim reads to tell whether an earlier event still holds the key for a handler.
 * - `outbox_ordering_key`: each key's last position. An emit takes the next one by updating the
 *   key's row, whose lock it holds to COMMIT, so a transaction that commits later gets a later
 *   position: commit order, not the order ids or sequences were drawn in.
 * - `outbox_ordering_wait`: per ordered handler and key, the events emitted and not yet done for
 *   that handler. Read through the update that changes it (the row's latest version, after its
 *   lock), it tells an emit whether an earlier event still holds the key, whatever the emit's
 *   snapshot.
 * Nullable columns without defaults and new tables: nothing is rewritten, and the previous
 * version never reads them.
 */
export class OutboxOrdering1773000000000 implements MigrationInterface {
  name = 'OutboxOrdering1773000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE outbox_event
        ADD COLUMN IF NOT EXISTS ordering_key text,
        ADD COLUMN IF NOT EXISTS ordering_position bigint,
        ADD COLUMN IF NOT EXISTS ordered_for text[]
    `);
    await queryRunner.query(`
      CREATE INDEX IF NOT EXISTS outbox_event_ordering_idx
      ON outbox_event (ordering_key, ordering_position)
      WHERE ordering_position IS NOT NULL AND dispatched_at IS NULL AND discarded_at IS NULL
    `);
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS outbox_ordering_key (
        key            text   PRIMARY KEY,
        last_position  bigint NOT NULL
      )
    `);
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS outbox_ordering_wait (
        handler  text   NOT NULL,
        key      text   NOT NULL,
        waiting  bigint NOT NULL,
        PRIMARY KEY (handler, key)
      )
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE IF EXISTS outbox_ordering_wait`);
    await queryRunner.query(`DROP TABLE IF EXISTS outbox_ordering_key`);
    await queryRunner.query(`
      ALTER TABLE outbox_event
        DROP COLUMN IF EXISTS ordered_for,
        DROP COLUMN IF EXISTS ordering_position,
        DROP COLUMN IF EXISTS ordering_key
    `);
  }
}
