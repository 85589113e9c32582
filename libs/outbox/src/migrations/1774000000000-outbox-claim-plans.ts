import { MigrationInterface, QueryRunner } from 'typeorm';

/** The functions the engine calls on every claim and ordered settle, by signature. */
const ENGINE_FUNCTIONS = [
  'outbox_claim_live_v2(integer, double precision, text[], timestamptz, text[])',
  'outbox_ordered_park_v1(jsonb, text[], text)',
  'outbox_ordered_done_v1(uuid[], text[], text)',
];

/**
 * Plans that hold at every table size for the engine's PL/pgSQL functions. A function keeps its
 * statements' plans for the life of the connection; planned while `outbox_event` was nearly
 * empty (a fresh install, a table just truncated, before autovacuum's first ANALYZE), the claim
 * leased its rows with a sequential scan, and kept it while the table grew: one scan of the
 * whole table per claim. Every statement of these functions has an index that serves it, so
 * they run with sequential scans priced out (`enable_seqscan = off`, for the function's own
 * statements only): whatever the statistics said when a plan was made, it reads by index.
 */
export class OutboxClaimPlans1774000000000 implements MigrationInterface {
  name = 'OutboxClaimPlans1774000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    for (const fn of ENGINE_FUNCTIONS) {
      await queryRunner.query(`ALTER FUNCTION ${fn} SET enable_seqscan = off`);
    }
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    for (const fn of ENGINE_FUNCTIONS) {
      await queryRunner.query(`ALTER FUNCTION ${fn} RESET enable_seqscan`);
    }
  }
}
