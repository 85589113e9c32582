import type { PartitionBacklog } from './status.types';

/** Most partitions one read visits: each costs an index probe of about 3 buffers. */
export const PARTITIONS_VISITED = 1000;

/** The most a partition's `due` counts: a count equal to it means at least that many. */
export const PARTITION_DUE_LIMIT = 10_000;

/** An event's partition, as `outbox_event_fair_idx` holds it (the planner matches its text). */
const PARTITION = `coalesce(o.partition_key, o.organization_id, '')`;

/** The rows of `outbox_event_fair_idx`: first tries waiting for a claim. */
const WAITING_FIRST_TRY = `o.dispatched_at IS NULL
        AND o.dead_at IS NULL
        AND o.lease_expires_at IS NULL
        AND o.failures = '{}'
        AND o.next_attempt_at < timestamptz '9999-12-31 00:00:00+00'`;

function firstAfter(after: string | null): string {
  return `
      SELECT ${PARTITION} AS key, o.next_attempt_at AS oldest
      FROM outbox_event AS o
      WHERE ${WAITING_FIRST_TRY}${after ? `\n        AND ${PARTITION} > ${after}` : ''}
      ORDER BY ${PARTITION}, o.next_attempt_at, o.id
      LIMIT 1`;
}

/**
 * The partitions with a due first try waiting for a claim, the fair claims' partitions: each
 * with its oldest due first try's wait and how many are due (counted up to $2). A skip scan of
 * `outbox_event_fair_idx`, one probe per partition with a waiting first try, at most $1 of them
 * (in key order), then a bounded count in each due one: its cost follows the partitions with
 * work and $2, not the backlog. Retries are not counted (they have no share in a fair claim).
 */
export const PARTITION_BACKLOG = `
  WITH RECURSIVE partitions AS (
    (${firstAfter(null)})
    UNION ALL
    SELECT step.key, step.oldest
    FROM partitions AS p
    CROSS JOIN LATERAL (${firstAfter('p.key')}) AS step
  ),
  visited AS (SELECT * FROM partitions LIMIT $1)
  SELECT v.key AS partition,
         (extract(epoch FROM now() - v.oldest) * 1000)::float8 AS oldest_due_wait_ms,
         (SELECT count(*)
          FROM (SELECT 1
                FROM outbox_event AS o
                WHERE ${WAITING_FIRST_TRY}
                  -- A range, not an equality, so that only outbox_event_fair_idx gives the
                  -- order (see outbox_claim_fair_v1's shares).
                  AND ${PARTITION} >= v.key
                  AND ${PARTITION} <= v.key
                  AND o.next_attempt_at <= now()
                ORDER BY ${PARTITION}, o.next_attempt_at, o.id
                LIMIT $2) AS due)::int AS due,
         (SELECT count(*) FROM visited)::int AS visited
  FROM visited AS v
  WHERE v.oldest <= now()
`;

export function partitionBacklogParameters(): unknown[] {
  return [PARTITIONS_VISITED, PARTITION_DUE_LIMIT];
}

interface PartitionBacklogRow {
  partition: string;
  oldest_due_wait_ms: number;
  due: number;
  visited: number;
}

export interface PartitionBacklogRead {
  partitions: PartitionBacklog[];
  /** Every partition with a waiting first try was visited (fewer than `PARTITIONS_VISITED`). */
  complete: boolean;
}

export function toPartitionBacklog(rows: PartitionBacklogRow[]): PartitionBacklogRead {
  return {
    partitions: rows.map((row) => ({
      partition: row.partition,
      due: row.due,
      dueAtLeast: row.due >= PARTITION_DUE_LIMIT,
      oldestDueWaitMs: Math.max(0, Math.round(row.oldest_due_wait_ms)),
    })),
    complete: (rows[0]?.visited ?? 0) < PARTITIONS_VISITED,
  };
}
