import { MigrationInterface, QueryRunner } from 'typeorm';

/** The live claim's two forms: from the start of the due range, or from a lower bound. */
function claimFrom(lowerBound: string): string {
  return `
    RETURN QUERY
    WITH picked AS (
      SELECT o.id, o.next_attempt_at
      FROM outbox_event AS o
      WHERE o.dispatched_at IS NULL
        AND o.dead_at IS NULL
        AND o.next_attempt_at <= now()${lowerBound}
        AND (p_types IS NULL OR o.type = ANY (p_types))
      ORDER BY o.next_attempt_at, o.id
      LIMIT p_limit
      FOR UPDATE SKIP LOCKED
    ),
    claimed AS (
      UPDATE outbox_event AS e
      SET attempts = e.attempts + 1,
          lease_expires_at = now() + make_interval(secs => p_lease_ms / 1000.0),
          next_attempt_at = now() + make_interval(secs => p_lease_ms / 1000.0)
      WHERE e.id = ANY (ARRAY(SELECT picked.id FROM picked))
      RETURNING e
    )
    SELECT claimed.e, (extract(epoch FROM picked.next_attempt_at) * 1000)::float8
    FROM claimed
    JOIN picked ON picked.id = (claimed.e).id
    ORDER BY picked.next_attempt_at, picked.id;`;
}

/**
 * `outbox_claim_live_v1(limit, lease ms, types, due from)`: the engine's live claim (due live
 * rows, leased, in due order, each with the time it was due) as a PL/pgSQL function, so that
 * PostgreSQL keeps its plans for the life of the connection instead of parsing and planning the
 * statement on every claim, which is most of what a small claim costs the server. A function
 * rather than a prepared statement: it works the same behind a transaction pooler of any
 * version. Each form of the claim (with and without a lower bound) is a statement of its own,
 * so each keeps a plan that fits it; both plans are range scans of the due index
 * (`outbox_event_due_idx`) whatever the parameters.
 *
 * The version in the name is the function's contract: a release that changes what it does
 * adds `_v2` and leaves `_v1` to the pods of the previous release. The previous release never
 * calls it, and this release claims without it until it exists (see `OutboxLeaseStore.claim`),
 * so the migration may run while either runs.
 */
export class OutboxClaimFunction1772000000000 implements MigrationInterface {
  name = 'OutboxClaimFunction1772000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE OR REPLACE FUNCTION outbox_claim_live_v1(
        p_limit integer,
        p_lease_ms double precision,
        p_types text[],
        p_due_from timestamptz
      )
      RETURNS TABLE (event outbox_event, due_ms double precision)
      LANGUAGE plpgsql
      AS $claim$
      BEGIN
        IF p_due_from IS NULL THEN${claimFrom('')}
        ELSE${claimFrom(`\n        AND o.next_attempt_at >= p_due_from`)}
        END IF;
      END
      $claim$
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `DROP FUNCTION IF EXISTS outbox_claim_live_v1(integer, double precision, text[], timestamptz)`,
    );
  }
}
