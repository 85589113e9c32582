import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The outbox table. Times default to the SQL clock; the indexes follow the claim:
 * live rows in `(occurred_at, id)` order, dead rows by dead time, delivered rows by
 * delivery time for the retention sweep.
 */
export class CreateOutboxEvent1764400000000 implements MigrationInterface {
  name = 'CreateOutboxEvent1764400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE outbox_event (
        id               uuid        NOT NULL,
        type             text        NOT NULL,
        aggregate_type   text        NOT NULL,
        aggregate_id     text        NOT NULL,
        organization_id  text,
        request_id       text,
        payload          jsonb       NOT NULL,
        metadata         jsonb       NOT NULL DEFAULT '{}'::jsonb,
        occurred_at      timestamptz NOT NULL DEFAULT now(),
        attempts         integer     NOT NULL DEFAULT 0,
        lease_expires_at timestamptz,
        next_attempt_at  timestamptz NOT NULL DEFAULT now(),
        dispatched_at    timestamptz,
        dead_at          timestamptz,
        deliveries       jsonb       NOT NULL DEFAULT '{}'::jsonb,
        last_error       text,
        CONSTRAINT outbox_event_pkey PRIMARY KEY (id),
        CONSTRAINT outbox_event_deliveries_is_object CHECK (jsonb_typeof(deliveries) = 'object')
      )
    `);
    await queryRunner.query(`
      CREATE INDEX outbox_event_pending_idx ON outbox_event (occurred_at, id)
      WHERE dispatched_at IS NULL AND dead_at IS NULL
    `);
    await queryRunner.query(`
      CREATE INDEX outbox_event_dead_idx ON outbox_event (dead_at, id)
      WHERE dispatched_at IS NULL AND dead_at IS NOT NULL
    `);
    await queryRunner.query(`
      CREATE INDEX outbox_event_dispatched_idx ON outbox_event (dispatched_at)
      WHERE dispatched_at IS NOT NULL
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE outbox_event`);
  }
}
