import { typeFilter } from '../store.client';
import type { MarkFailedOptions, TypeFilterOptions } from './lease.types';

/**
 * Brings dead rows whose next replay lies further ahead than the running configuration's
 * forward to it: `dead_at` plus their type's dead retry (the time a settle under this
 * configuration would have written). A dead row's next replay is written when it dies, from
 * that day's configuration; an app restarted with a shorter `deadRetryMs`, or with replays turned
 * back on (rows written as never due), would otherwise wait out the old schedule. Only forward:
 * a row an operator replayed (due now) or a shorter schedule stays as it is; a configuration
 * without replays (a negative retry) moves nothing.
 *
 * One batch of `$3` rows in due order after the keyset `($1, $2)`, from those due later than now;
 * rows under a lease (a replay running) are left to their settle. Returns how many rows moved and
 * the keyset of the batch's last row (null when the batch was the last).
 * Parameters: see `deadScheduleParameters`.
 */
export const BRING_DEAD_FORWARD = `
  WITH batch AS (
    SELECT id, next_attempt_at,
           coalesce(($4::jsonb ->> type)::float8, $5::float8) AS retry_ms
    FROM outbox_event
    WHERE dispatched_at IS NULL
      AND dead_at IS NOT NULL
      AND next_attempt_at > now()
      AND ($1::timestamptz IS NULL OR (next_attempt_at, id) > ($1::timestamptz, $2::uuid))
      AND ($6::text[] IS NULL OR type = ANY ($6::text[]))
    ORDER BY next_attempt_at, id
    LIMIT $3
  ),
  moved AS (
    UPDATE outbox_event AS e
    SET next_attempt_at = e.dead_at + make_interval(secs => batch.retry_ms / 1000.0)
    FROM batch
    WHERE e.id = batch.id
      AND batch.retry_ms >= 0
      AND e.discarded_at IS NULL
      AND e.lease_expires_at IS NULL
      AND e.next_attempt_at > e.dead_at + make_interval(secs => batch.retry_ms / 1000.0)
    RETURNING e.id
  ),
  last AS (
    SELECT next_attempt_at, id FROM batch ORDER BY next_attempt_at DESC, id DESC LIMIT 1
  )
  SELECT (SELECT count(*) FROM moved)::int AS moved,
         (SELECT count(*) FROM batch)::int AS scanned,
         -- As text, to the microsecond: rows dead in one statement share a time, and a cursor
         -- cut to the millisecond would find the same batch again.
         (SELECT next_attempt_at::text FROM last) AS after_at,
         (SELECT id FROM last) AS after_id
`;

/** Where the next batch starts: the keyset of the last row seen. */
export interface DeadScheduleCursor {
  /** `next_attempt_at` as the server wrote it. */
  at: string;
  id: string;
}

export interface DeadScheduleBatch {
  moved: number;
  /** Null once the batch held fewer rows than asked: no more to look at. */
  next: DeadScheduleCursor | null;
}

/**
 * $1/$2 keyset (or nulls), $3 batch size, $4 jsonb object of dead retry ms by type, $5 dead retry
 * ms of other types (-1: none), $6 types (text[] or null).
 */
export function deadScheduleParameters(
  options: MarkFailedOptions & TypeFilterOptions,
  after: DeadScheduleCursor | null,
  limit: number,
): unknown[] {
  const ms = (value: number) => (value === Infinity ? -1 : Math.max(0, value));
  const byType = Object.entries(options.deadRetryByType ?? {}).map(([type, value]) => [
    type,
    ms(value),
  ]);
  return [
    after?.at ?? null,
    after?.id ?? null,
    limit,
    JSON.stringify(Object.fromEntries(byType)),
    ms(options.deadRetryMs),
    typeFilter(options),
  ];
}

export function toDeadScheduleBatch(
  rows: { moved: number; scanned: number; after_at: string | null; after_id: string | null }[],
  limit: number,
): DeadScheduleBatch {
  const [row] = rows;
  const more = row.scanned === limit && row.after_at !== null && row.after_id !== null;
  return { moved: row.moved, next: more ? { at: row.after_at!, id: row.after_id! } : null };
}
