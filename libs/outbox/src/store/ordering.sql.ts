/**
 * What the admin listing, the health probe and the metrics read of per-key ordering. Each read
 * follows a small partial index of migration 1773, so its cost does not grow with the backlog.
 */

/**
 * Dead events that an ordered handler still has to be done with (`outbox_event_blocked_idx`). A
 * dead event keeps in `ordered_for` only the handlers that block on dead events: one that skips
 * them was done with it when it died.
 */
export const DEAD_ORDERED = `e.dispatched_at IS NULL
      AND e.dead_at IS NOT NULL
      AND e.discarded_at IS NULL
      AND e.ordered_for <> '{}'`;

/**
 * Whether event `e` is the head of its key for `handler`: no earlier event of the key is still
 * to be done for it (the test claims make, on `outbox_event_ordering_idx`). Only an operator's
 * restore of an event could put a dead event behind another; the test keeps such a key listed
 * once, at its head.
 */
export function isHead(e: string, handler: string): string {
  return `NOT EXISTS (
        SELECT 1 FROM outbox_event AS earlier
        WHERE earlier.ordering_key = ${e}.ordering_key
          AND earlier.ordering_position < ${e}.ordering_position
          AND earlier.dispatched_at IS NULL
          AND earlier.discarded_at IS NULL
          AND ${handler} = ANY (earlier.ordered_for))`;
}

/**
 * Keys blocked for an ordered handler (their head is dead for it), counted up to `limit` (an SQL
 * expression, or null for all). `types`: an SQL text[] expression narrowing to those types, or
 * null.
 */
export function blockedKeyCount(limit: string | null, types: string): string {
  return `(SELECT count(*)
       FROM (SELECT 1
             FROM outbox_event AS e, unnest(e.ordered_for) AS h(handler)
             WHERE ${DEAD_ORDERED}
               AND (${types} IS NULL OR e.type = ANY (${types}))
               AND ${isHead('e', 'h.handler')}
             ORDER BY e.dead_at, e.id${limit === null ? '' : `\n             LIMIT ${limit}`}) AS blocked)::int`;
}

/**
 * How long the oldest live event whose ordered handler failed on it and will try again, so
 * holding the events of its key behind it for that handler, has waited since it was emitted,
 * in ms; null when there is none. `outbox_event_ordered_retry_idx` holds exactly those events.
 */
export function orderedRetryWaitMs(types: string): string {
  return `(SELECT (extract(epoch FROM now() - e.occurred_at) * 1000)::float8
       FROM outbox_event AS e
       WHERE e.dispatched_at IS NULL
         AND e.dead_at IS NULL
         AND e.failures ?| e.ordered_for
         AND (${types} IS NULL OR e.type = ANY (${types}))
       ORDER BY e.occurred_at
       LIMIT 1)`;
}
