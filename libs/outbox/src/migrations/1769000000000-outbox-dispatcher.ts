import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `outbox_dispatcher`: one row per running dispatcher, written by the dispatcher every 10 s and
 * removed when it stops, so an operator (the dashboard, `OutboxAdmin.dispatchers`) sees every
 * instance that reports in, not only the one serving the page. A small table of its own: the
 * outbox table's hot paths never touch it. The previous version runs against it unchanged.
 */
export class OutboxDispatcherReports1769000000000 implements MigrationInterface {
  name = 'OutboxDispatcherReports1769000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS outbox_dispatcher (
        id             text        PRIMARY KEY,
        host           text        NOT NULL,
        pid            integer     NOT NULL,
        state          text        NOT NULL,
        listener       text        NOT NULL,
        types          text[],
        concurrency    integer     NOT NULL,
        in_flight      integer     NOT NULL,
        started_at     timestamptz NOT NULL,
        last_claim_at  timestamptz,
        seen_at        timestamptz NOT NULL DEFAULT now()
      )
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE outbox_dispatcher`);
  }
}
