import { MigrationInterface, QueryRunner } from 'typeorm';

/** Tables of the reference app (apps/reference): its domain and the effects of its handlers. */
export class CreateReferenceApp1764500000000 implements MigrationInterface {
  name = 'CreateReferenceApp1764500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE organization (
        id          uuid        PRIMARY KEY,
        name        text        NOT NULL,
        created_at  timestamptz NOT NULL DEFAULT now()
      )
    `);
    await queryRunner.query(`
      CREATE TABLE member (
        id               uuid        PRIMARY KEY,
        organization_id  uuid        NOT NULL REFERENCES organization (id),
        email            text        NOT NULL,
        role             text        NOT NULL CHECK (role IN ('admin', 'member')),
        created_at       timestamptz NOT NULL DEFAULT now(),
        UNIQUE (organization_id, email)
      )
    `);
    await queryRunner.query(`
      CREATE TABLE invoice (
        id               uuid        PRIMARY KEY,
        organization_id  uuid        NOT NULL REFERENCES organization (id),
        number           text        NOT NULL,
        amount_cents     integer     NOT NULL CHECK (amount_cents > 0),
        currency         text        NOT NULL,
        status           text        NOT NULL CHECK (status IN ('issued', 'paid')),
        issued_at        timestamptz NOT NULL DEFAULT now(),
        paid_at          timestamptz,
        UNIQUE (organization_id, number)
      )
    `);
    // One row per event, chained by hash in the order rows were appended.
    await queryRunner.query(`
      CREATE TABLE audit_entry (
        event_id         uuid        PRIMARY KEY,
        seq              bigint      NOT NULL UNIQUE,
        event_type       text        NOT NULL,
        aggregate_type   text        NOT NULL,
        aggregate_id     text        NOT NULL,
        organization_id  text,
        request_id       text,
        occurred_at      timestamptz NOT NULL,
        payload          jsonb       NOT NULL,
        prev_hash        text        NOT NULL,
        hash             text        NOT NULL,
        recorded_at      timestamptz NOT NULL DEFAULT now()
      )
    `);
    await queryRunner.query(`
      CREATE TABLE webhook_endpoint (
        id               uuid        PRIMARY KEY,
        organization_id  uuid        NOT NULL REFERENCES organization (id),
        url              text        NOT NULL,
        secret           text        NOT NULL,
        event_types      text[]      NOT NULL,
        enabled          boolean     NOT NULL DEFAULT true,
        created_at       timestamptz NOT NULL DEFAULT now()
      )
    `);
    // Keyed by "<eventId>:<endpointId>": a redelivered event finds its rows already there.
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
    await queryRunner.query(`
      CREATE TABLE notification (
        id               uuid        PRIMARY KEY,
        user_id          uuid        NOT NULL REFERENCES member (id),
        organization_id  uuid        NOT NULL,
        event_id         uuid        NOT NULL,
        event_type       text        NOT NULL,
        title            text        NOT NULL,
        dedup_key        text        NOT NULL,
        created_at       timestamptz NOT NULL DEFAULT now(),
        read_at          timestamptz
      )
    `);
    await queryRunner.query(
      `CREATE UNIQUE INDEX notification_dedup_idx ON notification (user_id, dedup_key)`,
    );
    // Every mail the app sent or recorded, keyed by its idempotency key.
    await queryRunner.query(`
      CREATE TABLE mail_log (
        idempotency_key  text        PRIMARY KEY,
        recipient        text        NOT NULL,
        subject          text        NOT NULL,
        body             text        NOT NULL,
        transport        text        NOT NULL CHECK (transport IN ('smtp', 'recorded')),
        claimed_at       timestamptz NOT NULL DEFAULT now(),
        sent_at          timestamptz,
        created_at       timestamptz NOT NULL DEFAULT now()
      )
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const table of [
      'mail_log',
      'notification',
      'webhook_delivery',
      'webhook_endpoint',
      'audit_entry',
      'invoice',
      'member',
      'organization',
    ]) {
      await queryRunner.query(`DROP TABLE ${table}`);
    }
  }
}
