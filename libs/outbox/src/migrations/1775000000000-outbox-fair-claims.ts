import { MigrationInterface, QueryRunner } from 'typeorm';
import { claimFrom, duePick, PARKED, type ClaimShape } from './1773000000000-outbox-ordering';

/**
 * An event's partition: the key fair claims share out by. The emitter's `partitionKey`, else its
 * organization; events with neither share one partition, ''. Written out as in the index
 * (`OutboxFairIndex1775500000000`), which the planner matches by its text.
 */
const PARTITION = `coalesce(o.partition_key, o.organization_id, '')`;

/**
 * The rows of `outbox_event_fair_idx`: first tries waiting for a claim. Not leased, never failed,
 * not parked behind an earlier event of their key: a partition whose only events are in flight,
 * in backoff or parked has none, so looking for the partitions with work does not visit it.
 */
const WAITING_FIRST_TRY = `o.dispatched_at IS NULL
        AND o.dead_at IS NULL
        AND o.lease_expires_at IS NULL
        AND o.failures = '{}'
        AND o.next_attempt_at < ${PARKED}`;

/**
 * The first waiting first try of the partition after `after` (key order): its key and due time.
 * With the claim's lower bound of the due range (`lowerBound`): the entries a partition's claimed
 * events left behind in the index are before it, and the index skips them without reading their
 * rows, even while a long transaction keeps VACUUM from removing them (see `DueRange`).
 */
function nextPartition(after: string, lowerBound: string, upTo?: string): string {
  return `
        SELECT ${PARTITION} AS key, o.next_attempt_at AS due
        FROM outbox_event AS o
        WHERE ${WAITING_FIRST_TRY}${lowerBound}${after ? `\n        AND ${PARTITION} > ${after}` : ''}${
          upTo ? `\n        AND ${PARTITION} <= ${upTo}` : ''
        }
        ORDER BY ${PARTITION}, o.next_attempt_at, o.id
        LIMIT 1`;
}

/**
 * The fair pick. A skip scan of `outbox_event_fair_idx` finds the partitions that have a waiting
 * first try, one index probe each, starting after `p_after` (where the previous claim stopped)
 * and coming round from the start, at most `p_visit` of them. Each whose first try is due gets
 * an equal share of the limit, its rows in due order; the rest of the limit (shares a partition
 * could not fill, and retries, which have no share) is filled in due order. A partition with one
 * due event is served by the next claim that reaches it, whatever another has waiting, and the
 * pick reads about one index probe per partition with work plus the rows it takes.
 *
 * `filled`: the row came from the fill. The fill takes the first due rows not in a share, so
 * every due row before its last one is taken (or locked by another claim): the engine's head of
 * the due range may move there (see `DueRange`). `visited`: the last partition the scan reached,
 * where the next claim starts.
 */
function fairPick(lowerBound: string): ClaimShape {
  return {
    pick: `
    WITH RECURSIVE ahead AS (
      SELECT 1 AS n, first.key, first.due
      FROM (${nextPartition('p_after', lowerBound)}) AS first
      UNION ALL
      SELECT a.n + 1, step.key, step.due
      FROM ahead AS a
      CROSS JOIN LATERAL (${nextPartition('a.key', lowerBound)}) AS step
      WHERE a.n < p_visit
    ),
    behind AS (
      SELECT 1 AS n, first.key, first.due
      FROM (${nextPartition('', lowerBound, 'p_after')}) AS first
      WHERE (SELECT count(*) FROM ahead) < p_visit
      UNION ALL
      SELECT b.n + 1, step.key, step.due
      FROM behind AS b
      CROSS JOIN LATERAL (${nextPartition('b.key', lowerBound, 'p_after')}) AS step
      WHERE b.n + (SELECT count(*) FROM ahead) < p_visit
    ),
    due_partitions AS (
      SELECT v.key,
             row_number() OVER (ORDER BY v.round, v.n) AS i,
             count(*) OVER () AS due_count
      FROM (SELECT 1 AS round, ahead.* FROM ahead UNION ALL SELECT 2, behind.* FROM behind) AS v
      WHERE v.due <= now()
    ),
    shares AS (
      SELECT s.id, s.next_attempt_at, s.ordering_key, s.ordering_position
      FROM due_partitions AS d
      CROSS JOIN LATERAL (
        SELECT o.id, o.next_attempt_at, o.ordering_key, o.ordering_position
        FROM outbox_event AS o
        WHERE ${WAITING_FIRST_TRY}
          -- A range, not an equality: with an equality the order below would be one the due
          -- index gives too, and from statistics that miss a flood the planner walked the
          -- flood's rows in the due index for a quiet partition's share.
          AND ${PARTITION} >= d.key
          AND ${PARTITION} <= d.key
          AND o.next_attempt_at <= now()${lowerBound}
          AND (p_types IS NULL OR o.type = ANY (p_types))
        ORDER BY ${PARTITION}, o.next_attempt_at, o.id
        LIMIT p_limit / d.due_count + CASE WHEN d.i <= p_limit % d.due_count THEN 1 ELSE 0 END
        FOR UPDATE OF o SKIP LOCKED
      ) AS s
    ),
    fill AS (
      SELECT o.id, o.next_attempt_at, o.ordering_key, o.ordering_position
      FROM outbox_event AS o
      WHERE o.dispatched_at IS NULL
        AND o.dead_at IS NULL
        AND o.next_attempt_at <= now()${lowerBound}
        AND (p_types IS NULL OR o.type = ANY (p_types))
        -- A transaction does not skip its own locks: the rows of the shares are left out by id.
        AND o.id <> ALL (ARRAY(SELECT shares.id FROM shares))
      ORDER BY o.next_attempt_at, o.id
      LIMIT greatest(0, p_limit - (SELECT count(*) FROM shares))
      FOR UPDATE SKIP LOCKED
    ),
    picked AS (
      SELECT shares.*, false AS from_fill FROM shares
      UNION ALL
      SELECT fill.*, true FROM fill
    ),`,
    batch: { picked: `, picked.from_fill`, chained: `, false` },
    returned: `,
           batch.from_fill,
           coalesce((SELECT behind.key FROM behind ORDER BY behind.n DESC LIMIT 1),
                    (SELECT ahead.key FROM ahead ORDER BY ahead.n DESC LIMIT 1))`,
  };
}

/**
 * `outbox_claim_live_v2`'s pick in due order, in the fair claim's shape: every row counts as
 * filled (it is one of the first due rows), and the visit stays where it was.
 */
function inDueOrder(lowerBound: string): ClaimShape {
  return {
    ...duePick(lowerBound),
    batch: { picked: `, true AS from_fill`, chained: `, false` },
    returned: `,
           batch.from_fill,
           p_after`,
  };
}

/**
 * How many partitions have a due first try, counted up to 2, among the first `p_visit` with a
 * waiting one: a claim shares out only when it is 2. With one partition (an app whose events
 * carry no organization, or a single tenant's backlog) the pick in due order takes the same rows
 * for less: two index probes decide it.
 */
function duePartitions(lowerBound: string): string {
  return `
    SELECT count(*) INTO v_due
    FROM (
      WITH RECURSIVE visit AS (
        SELECT 1 AS n, first.key, first.due
        FROM (${nextPartition('', lowerBound)}) AS first
        UNION ALL
        SELECT v.n + 1, step.key, step.due
        FROM visit AS v
        CROSS JOIN LATERAL (${nextPartition('v.key', lowerBound)}) AS step
        WHERE v.n < p_visit
      )
      SELECT 1 FROM visit WHERE visit.due <= now() LIMIT 2
    ) AS due;`;
}

const DUE_FROM = `\n        AND o.next_attempt_at >= p_due_from`;

const CLAIM_FAIR_SIGNATURE =
  'outbox_claim_fair_v1(integer, double precision, text[], timestamptz, text[], text, integer)';

/**
 * `outbox_claim_fair_v1(limit, lease ms, types, due from, skip, after, visit)`:
 * `outbox_claim_live_v2` with the fair pick (see `fairPick`) in place of the due-order one while
 * two partitions or more have a due first try (see `duePartitions`); the parked events that
 * follow a picked one in its key are chained as there. Its statements' plans are held to
 * indexes at every table size, as `OutboxClaimPlans1774000000000` does for v2, and to the index
 * that gives their order (sorts priced out): from statistics taken while the table held no flood
 * (delivered rows, a quiet hour), the planner read a partition's share and the skip scan's steps
 * from the due index and sorted them, walking the whole flood for a quiet partition's one event,
 * 50 ms a claim. And without JIT compilation: the skip scan's row estimates put the plan's cost
 * past `jit_above_cost`, and compiling it took 100 ms of a claim that runs in about 2.
 */
const CLAIM_FAIR_FUNCTION = `
  CREATE OR REPLACE FUNCTION outbox_claim_fair_v1(
    p_limit integer,
    p_lease_ms double precision,
    p_types text[],
    p_due_from timestamptz,
    p_skip text[],
    p_after text,
    p_visit integer
  )
  RETURNS TABLE (event outbox_event, due_ms double precision, held text[], after uuid,
                 filled boolean, visited text)
  LANGUAGE plpgsql
  SET enable_seqscan = off
  SET enable_sort = off
  SET jit = off
  AS $claim$
  DECLARE
    v_due integer;
  BEGIN
    IF p_due_from IS NULL THEN${duePartitions('')}
      IF v_due < 2 THEN${claimFrom('', inDueOrder(''))}
      ELSE${claimFrom('', fairPick(''))}
      END IF;
    ELSE${duePartitions(DUE_FROM)}
      IF v_due < 2 THEN${claimFrom(DUE_FROM, inDueOrder(DUE_FROM))}
      ELSE${claimFrom(DUE_FROM, fairPick(DUE_FROM))}
      END IF;
    END IF;
  END
  $claim$`;

/**
 * Fair claims across partitions:
 * - `outbox_event.partition_key`: the partition an emitter named for an event
 *   (`NewOutboxEvent.partitionKey`); null for the events partitioned by their organization.
 *   Nullable, without a default: nothing is rewritten, and the previous version never reads it.
 * - `outbox_claim_fair_v1`: the live claim that shares each claim out across partitions.
 * The engine calls it once `outbox_event_fair_idx` is built too (the next migration,
 * `OutboxFairIndex1775500000000`), and the due-order claim until then.
 */
export class OutboxFairClaims1775000000000 implements MigrationInterface {
  name = 'OutboxFairClaims1775000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE outbox_event ADD COLUMN IF NOT EXISTS partition_key text`);
    await queryRunner.query(CLAIM_FAIR_FUNCTION);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION IF EXISTS ${CLAIM_FAIR_SIGNATURE}`);
    await queryRunner.query(`ALTER TABLE outbox_event DROP COLUMN IF EXISTS partition_key`);
  }
}
