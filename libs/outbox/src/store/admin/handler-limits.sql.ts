import type { HandlerLimitState } from './status.types';

/**
 * Each limit's state now (see `OutboxHandlerLimits1776000000000`): the limit as the app last
 * declared it, runs holding a place in flight, admissions in the last window of its rate, runs
 * held back so far, and when the last one held back is due while that is ahead. Busiest first,
 * at most $1 rows. A small table: one row per limited handler, or per handler and partition.
 */
export const LIMIT_STATES = `
  SELECT l.handler, l.partition_key, l.max_concurrent, l.rate_limit, l.per_ms,
         (SELECT count(*) FROM jsonb_each(l.holders) AS h
          WHERE (h.value #>> '{}')::timestamptz > now())::integer AS in_flight,
         (SELECT count(*) FROM unnest(l.starts) AS s
          WHERE s > now() - make_interval(secs => coalesce(l.per_ms, 0) / 1000.0))::integer
           AS in_window,
         l.held::float8 AS held,
         CASE WHEN l.promised > now() THEN l.promised END AS held_until
  FROM outbox_handler_limit AS l
  ORDER BY in_flight DESC, in_window DESC, l.held DESC, l.handler, l.partition_key
  LIMIT $1
`;

interface LimitStateRow {
  handler: string;
  partition_key: string;
  max_concurrent: number | null;
  rate_limit: number | null;
  per_ms: number | null;
  in_flight: number;
  in_window: number;
  held: number;
  held_until: Date | null;
}

export function toLimitStates(rows: LimitStateRow[]): HandlerLimitState[] {
  return rows.map((row) => ({
    handler: row.handler,
    partition: row.partition_key,
    maxConcurrent: row.max_concurrent,
    rate:
      row.rate_limit === null || row.per_ms === null
        ? null
        : { limit: row.rate_limit, perMs: row.per_ms },
    inFlight: row.in_flight,
    inWindow: row.in_window,
    held: row.held,
    heldUntil: row.held_until,
  }));
}
