import { NEVER_DUE } from './outbox-row.sql';
import { toDueInMs, toWaitMs } from './store.client';
import type { StateCounts } from './lease/lease.types';

/**
 * Unsettled rows counted by state over every row the statement reads (exact, so its cost grows
 * with the backlog): due, retrying, parked, in flight, expired leases and dead (not discarded),
 * with the oldest due live row's wait (the lag) and when the next row, live or dead, is due.
 * One list for the operator's status by type and for the exact pending state, so that the two
 * cannot count a state differently.
 */
export const STATE_COUNTS = `
    count(*) FILTER (WHERE dead_at IS NULL AND lease_expires_at IS NULL
                       AND next_attempt_at <= now())::int AS due,
    count(*) FILTER (WHERE dead_at IS NULL AND lease_expires_at IS NULL
                       AND next_attempt_at > now()
                       AND next_attempt_at < ${NEVER_DUE})::int AS retrying,
    count(*) FILTER (WHERE dead_at IS NULL AND next_attempt_at >= ${NEVER_DUE})::int AS parked,
    count(*) FILTER (WHERE dead_at IS NULL AND lease_expires_at > now())::int AS in_flight,
    count(*) FILTER (WHERE dead_at IS NULL AND lease_expires_at <= now())::int AS expired_leases,
    count(*) FILTER (WHERE dead_at IS NOT NULL AND discarded_at IS NULL)::int AS dead,
    (extract(epoch FROM now() - min(next_attempt_at) FILTER (WHERE dead_at IS NULL
                                                              AND next_attempt_at <= now()))
     * 1000)::float8 AS oldest_due_wait_ms,
    (extract(epoch FROM min(next_attempt_at) FILTER (WHERE discarded_at IS NULL
                                                      AND next_attempt_at < ${NEVER_DUE})
                        - now()) * 1000)::float8 AS next_due_in_ms`;

/** The columns of `STATE_COUNTS`, as a row has them. */
export interface StateCountsRow {
  due: number;
  retrying: number;
  in_flight: number;
  expired_leases: number;
  parked: number;
  dead: number;
  oldest_due_wait_ms: number | null;
  next_due_in_ms: number | null;
}

/** `STATE_COUNTS` of a row, with its lag and next due time. */
export function toStateCounts(
  row: StateCountsRow,
): StateCounts & { oldestDueWaitMs: number | null; nextDueInMs: number | null } {
  return {
    due: row.due,
    retrying: row.retrying,
    inFlight: row.in_flight,
    expiredLeases: row.expired_leases,
    parked: row.parked,
    dead: row.dead,
    oldestDueWaitMs: toWaitMs(row.oldest_due_wait_ms),
    nextDueInMs: toDueInMs(row.next_due_in_ms),
  };
}
