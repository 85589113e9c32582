import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Webhook deliveries are outbox events (`webhook.delivery`) now, so the reference app's own
 * delivery table goes. Deliveries still pending in it are not carried over: run this once they
 * have drained (or been given up), with the previous sender stopped.
 */
export class WebhooksOnOutbox1766500000000 implements MigrationInterface {
  name = 'WebhooksOnOutbox1766500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE webhook_delivery`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE webhook_delivery (
        id                text        PRIMARY KEY,
        endpoint_id       uuid        NOT NULL REFERENCES webhook_endpoint (id),
        event_id          uuid        NOT NULL,
        event_type        text        NOT NULL,
        organization_id   text,
        body              jsonb       NOT NULL,
        attempts          integer     NOT NULL DEFAULT 0,
        lease_expires_at  timestamptz,
        next_attempt_at   timestamptz NOT NULL DEFAULT now(),
        delivered_at      timestamptz,
        dead_at           timestamptz,
        last_status       integer,
        last_error        text,
        created_at        timestamptz NOT NULL DEFAULT now()
      )
    `);
    await queryRunner.query(`
      CREATE INDEX webhook_delivery_due_idx ON webhook_delivery (next_attempt_at, id)
      WHERE delivered_at IS NULL AND dead_at IS NULL
    `);
  }
}
