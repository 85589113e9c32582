import { HORIZON_COLUMNS, toHorizon, type HorizonRow } from '../horizon.sql';
import { NEVER_DUE } from '../outbox-row.sql';
import { STATE_COUNTS, toStateCounts, type StateCountsRow } from '../state-counts.sql';
import { blockedKeyCount, orderedRetryWaitMs } from '../ordering/ordering.sql';
import { toDueInMs, toWaitMs, typeFilter } from '../store.client';
import type {
  NextDueOptions,
  PendingState,
  PendingStateOptions,
  TypeFilterOptions,
} from './lease.types';

/**
 * The first entry of each due index: the earliest due time of a live row (from the claims' lower
 * bound, the parameter `dueFrom` names, when given), and of a dead one. $1 types.
 */
function earliestLive(dueFrom: string): string {
  return `(
  SELECT next_attempt_at
  FROM outbox_event
  WHERE dispatched_at IS NULL
    AND dead_at IS NULL
    AND (${dueFrom}::timestamptz IS NULL OR next_attempt_at >= ${dueFrom}::timestamptz)
    AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
  ORDER BY next_attempt_at
  LIMIT 1)`;
}
const EARLIEST_DEAD = `(
  SELECT next_attempt_at
  FROM outbox_event
  WHERE dispatched_at IS NULL
    AND dead_at IS NOT NULL
    AND discarded_at IS NULL
    -- A row waiting for a replay is not due, ever.
    AND next_attempt_at < ${NEVER_DUE}
    AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
  ORDER BY next_attempt_at
  LIMIT 1)`;

/**
 * Milliseconds until the earliest unsettled row is due (negative when one is already due; null
 * when none is unsettled): the first entry of each due index, two index probes. The live probe
 * starts at the claim's lower bound, for the reason given at CLAIM.
 * Parameters: see `nextDueParameters`.
 */
export const NEXT_DUE = `
  SELECT (extract(epoch FROM least(
            ${earliestLive('$2')},
            ${EARLIEST_DEAD}
          ) - now()) * 1000)::float8 AS next_due_in_ms
`;

/** NEXT_DUE: $1 types (text[] or null), $2 live rows due from (epoch ms, or null: all). */
export function nextDueParameters(options: NextDueOptions): unknown[] {
  const dueFrom = options.dueFrom ?? null;
  return [typeFilter(options), dueFrom === null ? null : new Date(dueFrom)];
}

/**
 * Counts and timings for the engine's next wake and for health reports, at a cost that does
 * not grow with the backlog: timings are index probes, and each count stops after $2 index
 * entries (a count equal to $2 means "at least"). A live row is due (claimable, never leased or
 * given back), retrying (resting until its next attempt), in flight (under a lease), an
 * expired lease (its lease ended without a settle: a relay crashed or stalled; claimable again)
 * or parked (waiting for an earlier event of its key, for ordered handlers: due at NEVER_DUE,
 * the end of the due index, until that event is done).
 * Lag is how long the oldest claimable live row has waited since it became claimable, so rows
 * resting in backoff are not lag.
 *
 * Leases are counted on the small leased index. Due and retrying rows share the due index with
 * leased ones (a leased row's next_attempt_at is its lease end: expired leases sit in the due
 * range, leases in flight beyond it), so each range is counted up to $2 plus the leases in it,
 * and the leases are subtracted. The ORDER BY of every count follows its index, which keeps the
 * planner on the index: a LIMIT without it can look cheaper as a sequential scan.
 * When expired leases reach $2, `due` may include some of them. Blocked keys and the oldest
 * retrying head of a key are read from their own small indexes (see `ordering.sql`).
 *
 * With $3 (the running engine's claim bound, see CLAIM) the due side starts there, as the
 * claims do: while a long transaction holds the xmin horizon, the entries every claim and settle
 * leave at the front of the due index stay, and a probe from the start would walk them all. A
 * row due before the bound (a late commit whose wake was missed) is then neither due nor lag
 * here until the next whole-range claim takes it (at the latest on the poll).
 * Parameters: see `pendingStateParameters`.
 */
export const PENDING_STATE = `
  WITH leases AS (
    SELECT
      (SELECT count(*)
       FROM (SELECT 1
             FROM outbox_event
             WHERE dispatched_at IS NULL
               AND lease_expires_at IS NOT NULL
               AND lease_expires_at > now()
               AND dead_at IS NULL
               AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
             ORDER BY lease_expires_at
             LIMIT $2::int) AS leased)::int AS in_flight,
      (SELECT count(*)
       FROM (SELECT 1
             FROM outbox_event
             WHERE dispatched_at IS NULL
               AND lease_expires_at IS NOT NULL
               AND lease_expires_at <= now()
               AND ($3::timestamptz IS NULL OR lease_expires_at >= $3::timestamptz)
               AND dead_at IS NULL
               AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
             ORDER BY lease_expires_at
             LIMIT $2::int) AS expired)::int AS expired_leases
  ),
  -- MATERIALIZED: the final SELECT names each figure more than once, and each probe runs once.
  ranges AS MATERIALIZED (
    SELECT
      (SELECT count(*)
       FROM (SELECT 1
             FROM outbox_event
             WHERE dispatched_at IS NULL
               AND dead_at IS NULL
               AND next_attempt_at <= now()
               AND ($3::timestamptz IS NULL OR next_attempt_at >= $3::timestamptz)
               AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
             ORDER BY next_attempt_at
             LIMIT $2::int + (SELECT expired_leases FROM leases)) AS due)::int AS due_range,
      (SELECT count(*)
       FROM (SELECT 1
             FROM outbox_event
             WHERE dispatched_at IS NULL
               AND dead_at IS NULL
               AND next_attempt_at > now()
               AND next_attempt_at < ${NEVER_DUE}
               AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
             ORDER BY next_attempt_at
             LIMIT $2::int + (SELECT in_flight FROM leases)) AS later)::int AS later_range,
      (SELECT count(*)
       FROM (SELECT 1
             FROM outbox_event
             WHERE dispatched_at IS NULL
               AND dead_at IS NULL
               AND next_attempt_at >= ${NEVER_DUE}
               AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
             ORDER BY next_attempt_at
             LIMIT $2::int) AS parked)::int AS parked,
      (SELECT count(*)
       FROM (SELECT 1
             FROM outbox_event
             WHERE dispatched_at IS NULL
               AND dead_at IS NOT NULL
               AND discarded_at IS NULL
               AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
             ORDER BY next_attempt_at
             LIMIT $2::int) AS dead)::int AS dead,
      ${earliestLive('$3')} AS live_due_at,
      ${EARLIEST_DEAD} AS dead_due_at
  )
  SELECT
    least($2::int, greatest(0, r.due_range - l.expired_leases)) AS due,
    least($2::int, greatest(0, r.later_range - l.in_flight)) AS retrying,
    l.in_flight,
    l.expired_leases,
    r.parked,
    r.dead,
    (extract(epoch FROM least(r.live_due_at, r.dead_due_at) - now()) * 1000)::float8
      AS next_due_in_ms,
    CASE WHEN r.live_due_at <= now()
      THEN (extract(epoch FROM now() - r.live_due_at) * 1000)::float8
    END AS oldest_due_wait_ms,
    ${blockedKeyCount('$2::int', '$1::text[]')} AS blocked_keys,
    ${orderedRetryWaitMs('$1::text[]')} AS ordered_wait_ms,${HORIZON_COLUMNS}
  FROM leases AS l, ranges AS r
`;

/**
 * PENDING_STATE with exact counts, for an admin page: it reads every unsettled row, so its cost
 * grows with the backlog. $1 types (text[] or null).
 */
export const EXACT_STATE = `
  SELECT${STATE_COUNTS},
    ${blockedKeyCount(null, '$1::text[]')} AS blocked_keys,
    ${orderedRetryWaitMs('$1::text[]')} AS ordered_wait_ms,${HORIZON_COLUMNS}
  FROM outbox_event
  WHERE dispatched_at IS NULL
    AND discarded_at IS NULL
    AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
`;

/** NEXT_DUE and EXACT_STATE: $1 types (text[] or null). */
export function typeParameters(options: TypeFilterOptions): unknown[] {
  return [typeFilter(options)];
}

/** PENDING_STATE: $1 types (text[] or null), $2 count limit, $3 due from (epoch ms) or null. */
export function pendingStateParameters(
  options: PendingStateOptions,
  countLimit: number,
): unknown[] {
  const dueFrom = options.dueFrom ?? null;
  return [typeFilter(options), countLimit, dueFrom === null ? null : new Date(dueFrom)];
}

export function toNextDue([row]: { next_due_in_ms: number | null }[]): number | null {
  return toDueInMs(row.next_due_in_ms);
}

interface StateRow extends HorizonRow, StateCountsRow {
  blocked_keys: number;
  ordered_wait_ms: number | null;
}

/** The state row of PENDING_STATE (`countLimit` its cap) or EXACT_STATE (`countLimit` null). */
export function toPendingState(countLimit: number | null) {
  return ([row]: StateRow[]): PendingState => ({
    ...toStateCounts(row),
    blockedKeys: row.blocked_keys,
    orderedWaitMs: toWaitMs(row.ordered_wait_ms),
    countLimit,
    horizon: toHorizon(row),
  });
}
