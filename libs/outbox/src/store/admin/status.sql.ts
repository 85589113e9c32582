import { STATE_COUNTS, toStateCounts, type StateCountsRow } from '../state-counts.sql';
import type { InstanceReport } from '../instance-report.store';
import type { MinuteCount, TypeBacklog } from './status.types';

/**
 * Undelivered events by type and state, for an operator's status (whose totals are their sums):
 * it reads every undelivered row once, so its cost grows with the backlog (the statement timeout
 * bounds it). States as in STATE_COUNTS; `oldest_due_wait_ms` is the type's lag,
 * `next_due_in_ms` when its next row (live or dead) is due.
 */
export const BACKLOG_BY_TYPE = `
  SELECT type,${STATE_COUNTS},
    count(*) FILTER (WHERE discarded_at IS NOT NULL)::int AS discarded
  FROM outbox_event
  WHERE dispatched_at IS NULL
  GROUP BY type
  ORDER BY type
`;

/**
 * Events delivered in each of the last $1 minutes, oldest first, every minute present (0 when
 * none): one range of `outbox_event_dispatched_idx` per minute.
 */
export const THROUGHPUT = `
  SELECT m.minute,
         (SELECT count(*)::int
          FROM outbox_event
          WHERE dispatched_at >= m.minute
            AND dispatched_at < m.minute + interval '1 minute') AS delivered
  FROM generate_series(date_trunc('minute', now()) - make_interval(mins => $1::int - 1),
                       date_trunc('minute', now()),
                       interval '1 minute') AS m(minute)
  ORDER BY m.minute
`;

/** Every instance that reported in, with how long ago (ms) it last did. */
export const LIST_INSTANCES = `
  SELECT id, host, pid, state, listener, types, concurrency, in_flight, started_at,
         last_claim_at, seen_at, (extract(epoch FROM now() - seen_at) * 1000)::float8 AS silent_ms
  FROM outbox_dispatcher
  ORDER BY host, pid, id
`;

/** THROUGHPUT: $1 the minutes. */
export function throughputParameters(minutes: number): unknown[] {
  return [minutes];
}

interface BacklogRow extends StateCountsRow {
  type: string;
  discarded: number;
}

export function toBacklog(rows: BacklogRow[]): TypeBacklog[] {
  return rows.map((row) => ({ type: row.type, ...toStateCounts(row), discarded: row.discarded }));
}

export function toMinuteCounts(rows: { minute: Date; delivered: number }[]): MinuteCount[] {
  return rows.map((row) => ({ at: row.minute, delivered: row.delivered }));
}

interface InstanceRow {
  id: string;
  host: string;
  pid: number;
  state: string;
  listener: string;
  types: string[] | null;
  concurrency: number;
  in_flight: number;
  started_at: Date;
  last_claim_at: Date | null;
  seen_at: Date;
  silent_ms: number;
}

/** An instance's last report, when it came and how long ago. */
export type ReportedInstance = InstanceReport & { seenAt: Date; silentMs: number };

export function toInstances(rows: InstanceRow[]): ReportedInstance[] {
  return rows.map((row) => ({
    id: row.id,
    host: row.host,
    pid: row.pid,
    state: row.state,
    listener: row.listener,
    types: row.types,
    concurrency: row.concurrency,
    inFlight: row.in_flight,
    startedAt: row.started_at,
    lastClaimAt: row.last_claim_at,
    seenAt: row.seen_at,
    silentMs: Math.max(0, row.silent_ms),
  }));
}
