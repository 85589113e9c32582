import { NEVER_DUE } from '../outbox-row.sql';
import { WAKE_PAYLOAD } from '../wake-payload.sql';
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
 * Whether an earlier event of event `e`'s key is still to be done for `handler`: placed before
 * it, neither delivered nor discarded, and still waiting on the handler (in its `ordered_for`).
 * With `skipDead` (an SQL text[] expression of the handlers that skip dead events), a dead event
 * does not hold those. One probe of `outbox_event_ordering_idx`, which stops at the first such
 * event. The one test of "held behind an earlier event of the key" for every statement; the claim
 * function of migration 1773 keeps a copy of it, as a migration keeps what it created.
 */
export function heldBehindEarlier(e: string, handler: string, skipDead?: string): string {
  const deadSkipped = skipDead
    ? `
          AND NOT (earlier.dead_at IS NOT NULL AND ${handler} = ANY (${skipDead}))`
    : '';
  return `EXISTS (
        SELECT 1 FROM outbox_event AS earlier
        WHERE earlier.ordering_key = ${e}.ordering_key
          AND earlier.ordering_position < ${e}.ordering_position
          AND earlier.dispatched_at IS NULL
          AND earlier.discarded_at IS NULL
          AND ${handler} = ANY (earlier.ordered_for)${deadSkipped})`;
}

/**
 * Whether event `e` is the head of its key for `handler`: no earlier event of the key is still
 * to be done for it. Only an operator's restore of an event could put a dead event behind
 * another; the test keeps such a key listed once, at its head.
 */
export function isHead(e: string, handler: string): string {
  return `NOT ${heldBehindEarlier(e, handler)}`;
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

/**
 * Wakes parked events whose ordered handlers no earlier event of their key holds any more: the
 * wake a done should have made but did not (an instance of a version without per-key ordering
 * settled the event ahead, or a row was changed by hand). Reads $2 parked events after $1 (by
 * id, the end of the due index), wakes those no event holds, and returns how many it read, the
 * last id read (the next batch's $1), how many it woke, and the (handler, key) pairs of those it
 * woke, whose wait counts the missed done left too high (`RECOUNT_WAITS`). A wake needs no lock
 * on the wait rows: it only makes an event due, and the claim's own test holds it if an earlier
 * event came back meanwhile.
 * $1 last id read or null, $2 batch size, $3 channel.
 */
export const WAKE_STRANDED = `
  WITH scanned AS MATERIALIZED (
    SELECT e.id, e.ordering_key, e.ordering_position, e.ordered_for
    FROM outbox_event AS e
    WHERE e.dispatched_at IS NULL
      AND e.dead_at IS NULL
      AND e.next_attempt_at = ${NEVER_DUE}
      AND ($1::uuid IS NULL OR e.id > $1::uuid)
    ORDER BY e.next_attempt_at, e.id
    LIMIT $2
  ),
  stranded AS (
    SELECT x.id
    FROM outbox_event AS x
    WHERE x.id IN (
        SELECT s.id FROM scanned AS s
        WHERE s.ordered_for <> '{}'
          AND NOT EXISTS (SELECT 1 FROM unnest(s.ordered_for) AS h(handler)
                          WHERE ${heldBehindEarlier('s', 'h.handler')}))
      AND x.next_attempt_at = ${NEVER_DUE}
      AND x.dead_at IS NULL
    FOR UPDATE SKIP LOCKED
  ),
  woken AS (
    UPDATE outbox_event AS e SET next_attempt_at = now()
    FROM stranded WHERE e.id = stranded.id
    RETURNING e.ordering_key, e.ordered_for
  ),
  pairs AS (
    SELECT DISTINCT h.handler, w.ordering_key AS key
    FROM woken AS w, unnest(w.ordered_for) AS h(handler)
  )
  SELECT (SELECT count(*) FROM scanned)::int AS scanned,
         (SELECT id FROM scanned ORDER BY id DESC LIMIT 1) AS last_id,
         (SELECT count(*) FROM woken)::int AS woken,
         (SELECT coalesce(array_agg(handler ORDER BY handler, key), '{}') FROM pairs) AS handlers,
         (SELECT coalesce(array_agg(key ORDER BY handler, key), '{}') FROM pairs) AS keys,
         CASE WHEN EXISTS (SELECT 1 FROM woken) THEN pg_notify($3, ${WAKE_PAYLOAD}) END AS notified
`;

/**
 * Sets the wait counts of (handler, key) pairs ($1, $2) to the events of the key not yet done
 * for the handler, as a done would have left them. The count is taken by a statement after the
 * one that locks the rows, so it reads every emit and settle of the key that went before: each
 * changes the count under the same lock.
 */
export const RECOUNT_WAITS = `
  SELECT 1
  FROM outbox_ordering_wait AS w
  WHERE (w.handler, w.key) IN (SELECT * FROM unnest($1::text[], $2::text[]))
  ORDER BY w.handler, w.key
  FOR UPDATE OF w;
  UPDATE outbox_ordering_wait AS w
  SET waiting = (SELECT count(*) FROM outbox_event AS e
                 WHERE e.ordering_key = w.key
                   AND e.ordering_position IS NOT NULL
                   AND e.dispatched_at IS NULL
                   AND e.discarded_at IS NULL
                   AND w.handler = ANY (e.ordered_for))
  WHERE (w.handler, w.key) IN (SELECT * FROM unnest($1::text[], $2::text[]))
`;

/** Whether key `k` has an event still to be done (`outbox_event_ordering_idx`). */
const KEY_HAS_EVENTS_TO_DO = `EXISTS (
      SELECT 1 FROM outbox_event AS e
      WHERE e.ordering_key = k.key
        AND e.ordering_position IS NOT NULL
        AND e.dispatched_at IS NULL
        AND e.discarded_at IS NULL)`;

/**
 * Forgets the keys nothing is left to do in: their row in `outbox_ordering_key`, so the next
 * emit into such a key starts its places again from 1, with no event of the key left to come
 * after. Reads $2 keys after $1, in key order, without locks; locks those that look done,
 * skipping any an emit holds (the keys in use are read, never written). Two statements in one
 * transaction: the locked keys are noted in a setting of the transaction, then checked again by
 * a statement whose snapshot is taken after the locks, so an emit into the key that committed
 * before them is seen. (One statement would judge with a snapshot older than its locks, and
 * could forget a key whose next event had just committed: the key's places would then start
 * again below that event's.) Returns how many keys it read and the last one (the next batch's
 * $1).
 */
export const FORGET_DONE_KEYS = `
  WITH page AS MATERIALIZED (
    SELECT k.key FROM outbox_ordering_key AS k
    WHERE ($1::text IS NULL OR k.key > $1::text)
    ORDER BY k.key
    LIMIT $2
  ),
  locked AS (
    SELECT k.key FROM outbox_ordering_key AS k
    WHERE k.key IN (SELECT key FROM page)
      AND NOT ${KEY_HAS_EVENTS_TO_DO}
    FOR UPDATE SKIP LOCKED
  )
  SELECT (SELECT count(*) FROM page)::int AS scanned,
         (SELECT key FROM page ORDER BY key DESC LIMIT 1) AS last,
         set_config('outbox.forget_keys',
                    coalesce((SELECT json_agg(key) FROM locked), '[]')::text, true) AS noted;
  DELETE FROM outbox_ordering_key AS k
  WHERE k.key IN (SELECT jsonb_array_elements_text(current_setting('outbox.forget_keys')::jsonb))
    AND NOT ${KEY_HAS_EVENTS_TO_DO}
`;

/**
 * Deletes wait rows at 0 (no event of the key to be done for the handler; an emit makes the row
 * again): reads $2 rows after ($1 handler, key) in key order without locks, and deletes those at
 * 0, skipping any an emit or a settle holds. A row changed since the statement began is tested
 * on its latest version. Returns how many rows it read and the last one.
 */
export const FORGET_IDLE_WAITS = `
  WITH page AS MATERIALIZED (
    SELECT w.handler, w.key FROM outbox_ordering_wait AS w
    WHERE $1::text[] IS NULL OR (w.handler, w.key) > (($1::text[])[1], ($1::text[])[2])
    ORDER BY w.handler, w.key
    LIMIT $2
  ),
  idle AS (
    SELECT w.handler, w.key FROM outbox_ordering_wait AS w
    WHERE (w.handler, w.key) IN (SELECT handler, key FROM page)
      AND w.waiting = 0
    FOR UPDATE SKIP LOCKED
  ),
  forgotten AS (
    DELETE FROM outbox_ordering_wait AS w
    USING idle
    WHERE w.handler = idle.handler AND w.key = idle.key AND w.waiting = 0
  )
  SELECT count(*)::int AS scanned,
         (SELECT ARRAY[handler, key] FROM page ORDER BY handler DESC, key DESC LIMIT 1) AS last
  FROM page
`;
