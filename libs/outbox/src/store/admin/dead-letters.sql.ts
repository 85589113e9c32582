import type { HandlerFailure } from '../outbox-event.entity';
import { encodeCursor, keysetTime, type KeysetPage } from './keyset-cursor.util';
import {
  DEAD_LETTER_FILTER,
  NEXT_ATTEMPT,
  deadLetterParameters,
  failedHandlersOf,
  fingerprintOf,
  handlerMessage,
} from './dead-letter-filter.sql';
import type {
  DeadLetter,
  DeadLetterFilter,
  DeadLetterGroup,
  DeadLetterList,
} from './dead-letter.types';

/**
 * A page of dead letters, newest first by dead time (with retrying events: by dead time, else
 * occurrence) and id, read by keyset from $12/$13 (the last row of the previous page; its time as
 * `dead_letter_key` gives it with microseconds). Dead only, the order is `outbox_event_dead_idx`
 * read backwards. Parameters: see `listParameters`.
 */
export function listDeadLettersStatement(includeRetrying: boolean): string {
  const key = includeRetrying ? 'coalesce(dead_at, occurred_at)' : 'dead_at';
  return `
  SELECT id, type, aggregate_type, aggregate_id, organization_id, attempts, deliveries, failures,
         last_error, occurred_at, dead_at, ${NEXT_ATTEMPT} AS next_attempt_at, discarded_at,
         discard_reason,
         ${keysetTime(key)} AS dead_letter_key
  FROM outbox_event
  WHERE ${DEAD_LETTER_FILTER}
    AND ($12::timestamptz IS NULL OR (${key}, id) < ($12::timestamptz, $13::uuid))
  ORDER BY ${key} DESC, id DESC
  LIMIT $14
`;
}

/**
 * Dead letters grouped by (type, failed handler, error fingerprint), so one outage reads as one
 * line. A row per failed, undelivered handler of each event; `$3` and `$9` then narrow those rows
 * to the handler and the error text asked for. A handler's error is its part of `last_error`
 * (`<handler>: <message>; …`, written by the event's last failed attempt: a handler that used its
 * attempts earlier has none there). An event that records no failed handler (dead under the
 * event-level rule of an older version) gives one row with a null handler and its whole error.
 * The fingerprint is the message with UUIDs, hex ids and numbers blanked out, hashed.
 * $1–$11 the dead-letter filter, $12 the most groups returned (largest first).
 */
export const GROUP_DEAD_LETTERS = `
  WITH failed AS (
    SELECT e.type, h.key AS handler, coalesce(e.dead_at, e.occurred_at) AS seen_at,
           ${handlerMessage('h.key', 'e.last_error')} AS message
    FROM (SELECT * FROM outbox_event WHERE ${DEAD_LETTER_FILTER}) AS e,
         LATERAL ${failedHandlersOf('e.failures', 'e.deliveries')}
    WHERE $3::text IS NULL OR h.key = $3::text
  ),
  fingerprinted AS (
    SELECT type, handler, seen_at, message, ${fingerprintOf('message')} AS fingerprint
    FROM failed
    WHERE $9::text IS NULL OR strpos(lower(message), lower($9::text)) > 0
  )
  SELECT type, handler, fingerprint, min(message) AS sample_error, count(*)::int AS count,
         min(seen_at) AS first_seen_at, max(seen_at) AS last_seen_at
  FROM fingerprinted
  WHERE $11::text IS NULL OR fingerprint = $11::text
  GROUP BY type, handler, fingerprint
  ORDER BY count(*) DESC, max(seen_at) DESC
  LIMIT $12
`;

/** $1–$11 the filter, $12/$13 the keyset (the previous page's last time and id), $14 the page size (one more than asked: whether a next page exists). */
export function listParameters(filter: DeadLetterFilter, page: KeysetPage): unknown[] {
  return [
    ...deadLetterParameters(filter),
    page.after?.at ?? null,
    page.after?.id ?? null,
    page.limit + 1,
  ];
}

/** $1–$11 the filter, $12 the most groups. */
export function groupParameters(filter: DeadLetterFilter, limit: number): unknown[] {
  return [...deadLetterParameters(filter), limit];
}

/** Tags `list` cursors (see `encodeCursor`). */
export const DEAD_LETTERS_CURSOR = 'dead-letters';

interface DeadLetterRow {
  id: string;
  type: string;
  aggregate_type: string;
  aggregate_id: string;
  organization_id: string | null;
  attempts: number;
  deliveries: Record<string, string>;
  failures: Record<string, HandlerFailure>;
  last_error: string | null;
  occurred_at: Date;
  dead_at: Date | null;
  next_attempt_at: Date | null;
  discarded_at: Date | null;
  discard_reason: string | null;
  dead_letter_key: string;
}

function toDeadLetter(row: DeadLetterRow): DeadLetter {
  return {
    id: row.id,
    type: row.type,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    organizationId: row.organization_id,
    state: row.discarded_at ? 'discarded' : row.dead_at ? 'dead' : 'retrying',
    attempts: row.attempts,
    failedHandlers: Object.entries(row.failures)
      .filter(([name]) => !Object.hasOwn(row.deliveries, name))
      .map(([name, failure]) => ({
        name,
        failures: failure.count,
        retryAt: failure.retryAt === null ? null : new Date(failure.retryAt),
      })),
    deliveredHandlers: Object.keys(row.deliveries),
    lastError: row.last_error,
    occurredAt: row.occurred_at,
    deadAt: row.dead_at,
    nextAttemptAt: row.discarded_at ? null : row.next_attempt_at,
    discardedAt: row.discarded_at,
    discardReason: row.discard_reason,
  };
}

/** A page of rows (one more than `limit` when a next page exists) as a list with its cursor. */
export function toDeadLetterList(limit: number) {
  return (rows: DeadLetterRow[]): DeadLetterList => {
    const items = rows.slice(0, limit);
    const last = items[items.length - 1];
    return {
      items: items.map(toDeadLetter),
      next:
        rows.length > limit && last
          ? encodeCursor(DEAD_LETTERS_CURSOR, { at: last.dead_letter_key, id: last.id })
          : null,
    };
  };
}

interface GroupRow {
  type: string;
  handler: string | null;
  fingerprint: string;
  sample_error: string | null;
  count: number;
  first_seen_at: Date;
  last_seen_at: Date;
}

export function toGroups(rows: GroupRow[]): DeadLetterGroup[] {
  return rows.map((row) => ({
    type: row.type,
    handler: row.handler,
    fingerprint: row.fingerprint,
    sampleError: row.sample_error,
    count: row.count,
    firstSeenAt: row.first_seen_at,
    lastSeenAt: row.last_seen_at,
  }));
}
