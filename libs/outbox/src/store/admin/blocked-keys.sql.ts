import { DEAD_ORDERED, isHead } from '../ordering/ordering.sql';
import { handlerMessage } from './dead-letter-filter.sql';
import { encodeCursor, keysetTime, type KeysetPage } from './keyset-cursor.util';
import type { BlockedKey, BlockedKeyList } from './dead-letter.types';

export const BLOCKED_KEYS_CURSOR = 'blocked-keys';

/** The most a blocked key's `waiting` counts: a count equal to it means at least that many. */
export const WAITING_LIMIT = 1000;

/**
 * Keys blocked for an ordered handler: the head of the key for that handler is dead (see
 * `DEAD_ORDERED`; no handler options are needed to tell). Oldest first, by dead time, event id
 * and handler, read by keyset from $3–$5 (the last row of the previous page), on
 * `outbox_event_blocked_idx`. `waiting`: the events of the key queued behind the head for
 * the handler, counted up to $7 on `outbox_event_ordering_idx`.
 * $1 handler or null, $2 key or null, $3/$4/$5 keyset or nulls, $6 page size, $7 waiting limit.
 */
export const BLOCKED_KEYS = `
  WITH heads AS (
    SELECT e.id, e.ordering_key, e.ordering_position, e.dead_at, e.last_error, h.handler,
           ${keysetTime('e.dead_at')} AS keyset_at
    FROM outbox_event AS e, unnest(e.ordered_for) AS h(handler)
    WHERE ${DEAD_ORDERED}
      AND ($1::text IS NULL OR h.handler = $1::text)
      AND ($2::text IS NULL OR e.ordering_key = $2::text)
      AND ($3::timestamptz IS NULL
           OR (e.dead_at, e.id, h.handler) > ($3::timestamptz, $4::uuid, $5::text))
      AND ${isHead('e', 'h.handler')}
    ORDER BY e.dead_at, e.id, h.handler
    LIMIT $6
  )
  SELECT heads.id, heads.ordering_key, heads.handler, heads.dead_at, heads.keyset_at,
         ${handlerMessage('heads.handler', 'heads.last_error')} AS last_error,
         (SELECT count(*)
          FROM (SELECT 1
                FROM outbox_event AS w
                WHERE w.ordering_key = heads.ordering_key
                  AND w.ordering_position > heads.ordering_position
                  AND w.dispatched_at IS NULL
                  AND w.discarded_at IS NULL
                  AND heads.handler = ANY (w.ordered_for)
                ORDER BY w.ordering_key, w.ordering_position
                LIMIT $7::int) AS queued)::int AS waiting
  FROM heads
  ORDER BY heads.dead_at, heads.id, heads.handler
`;

export interface BlockedKeysQuery extends KeysetPage {
  handler: string | null;
  key: string | null;
}

/** BLOCKED_KEYS' parameters; one row more than the page asks for tells whether a next exists. */
export function blockedKeysParameters(query: BlockedKeysQuery): unknown[] {
  return [
    query.handler,
    query.key,
    query.after?.at ?? null,
    query.after?.id ?? null,
    query.after?.tie ?? null,
    query.limit + 1,
    WAITING_LIMIT,
  ];
}

interface BlockedKeyRow {
  id: string;
  ordering_key: string;
  handler: string;
  dead_at: Date;
  keyset_at: string;
  last_error: string | null;
  waiting: number;
}

export function toBlockedKeys(limit: number) {
  return (rows: BlockedKeyRow[]): BlockedKeyList => {
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return {
      items: page.map((row): BlockedKey => ({
        handler: row.handler,
        key: row.ordering_key,
        eventId: row.id,
        since: row.dead_at,
        lastError: row.last_error,
        waiting: row.waiting,
      })),
      next:
        rows.length > limit && last
          ? encodeCursor(BLOCKED_KEYS_CURSOR, {
              at: last.keyset_at,
              id: last.id,
              tie: last.handler,
            })
          : null,
    };
  };
}
