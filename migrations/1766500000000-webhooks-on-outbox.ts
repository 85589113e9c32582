import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Webhook deliveries are outbox events (`webhook.delivery`) now, so the reference app's own
 * delivery table goes. Deliveries still pending in it become `webhook.delivery` events, due now,
 * so none is lost; they get new ids, so a receiver that saw one of them before sees it under a
 * new `webhook-id`. Delivered and dead rows are history and go with the table. Stop the previous
 * version's senders first: one still running would fail on the missing table.
 */
export class WebhooksOnOutbox1766500000000 implements MigrationInterface {
  name = 'WebhooksOnOutbox1766500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      INSERT INTO outbox_event
        (id, type, aggregate_type, aggregate_id, organization_id, payload, causation_id,
         correlation_id)
      SELECT gen_random_uuid(), 'webhook.delivery', 'webhook_endpoint', d.endpoint_id::text,
             d.organization_id,
             jsonb_build_object('endpointId', d.endpoint_id, 'eventId', d.event_id,
                                'eventType', d.event_type, 'body', d.body),
             d.event_id, d.event_id::text
      FROM webhook_delivery AS d
      WHERE d.delivered_at IS NULL AND d.dead_at IS NULL
      ORDER BY d.created_at, d.id
    `);
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
