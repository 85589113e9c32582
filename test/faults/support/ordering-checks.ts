import type { FaultDatabase } from './database';
import { HANDLER_AUDIT, HANDLER_LEDGER } from './fault-handlers';

/**
 * What the ordered handler `fault-ledger` did with each key's `fault.ordered` events, counted
 * from the outbox table and the handlers' call records (start time of each run, and when it
 * ended: its effect written or its failure recorded). Start times are recorded to the
 * millisecond, so a comparison with a start allows 1 ms.
 *
 * - A key's events are in commit order by `ordering_position`; each producer loop's own
 *   events of a key must have positions in the order of its `seq` (it commits one after another).
 * - An event is released for the ledger when its delivery to it is recorded (`deliveries`) or it
 *   is discarded. No ledger run of an event may start before every earlier event of its key was
 *   released: an early start.
 * - Runs of one key must not overlap. A run that never recorded its end belongs to a process
 *   the scenario SIGKILLed (it ended when that process did; its effect, if any, never committed
 *   as a delivery) or is counted as unfinished.
 * - The delivering run of an event is its last successful run before its recorded delivery;
 *   per key, those runs started in commit order, with no event left undelivered or skipped.
 */
export interface OrderingFindings {
  events: number;
  keys: number;
  /** Ordered events without a key or position. */
  unplaced: number;
  /** Events placed before an event their producer loop committed earlier. */
  placedAgainstCommits: number;
  earlyStarts: number;
  overlaps: number;
  /** Runs with no recorded end by a process that was not killed. */
  unfinished: number;
  killedRuns: number;
  /** Ledger runs that threw on purpose (flaky first tries, poison). */
  failedRuns: number;
  /** Keys whose delivering runs did not start in commit order. */
  keysOutOfOrder: number;
  /** Delivered events without a successful run before the delivery. */
  deliveredUnseen: number;
  /** Events neither delivered to the ledger nor discarded. */
  unreleased: number;
  discarded: number;
  /** Events the unordered handler was not recorded as delivering. */
  unaudited: number;
  /**
   * From the release of an event to the first ledger run of the next one of its key, when that
   * one was emitted before (median, p99, max in ms): how fast a key's queue moves on.
   */
  handoffMs: [number | null, number | null, number | null];
  /** The first early starts and overlaps, one line each, to explain a failure. */
  details: string[];
}

/** Runs of the killed processes end at their exit: $1 pids, $2 exits in `Date.now()` ms. */
const RUNS = `
  ev AS (
    SELECT e.id, e.ordering_key AS key, e.ordering_position AS pos, e.occurred_at,
           (e.payload ->> 'producer')::int AS producer, (e.payload ->> 'seq')::int AS seq,
           (e.deliveries ->> '${HANDLER_LEDGER}')::timestamptz AS delivered_at,
           coalesce((e.deliveries ->> '${HANDLER_LEDGER}')::timestamptz, e.discarded_at) AS released_at,
           e.deliveries ? '${HANDLER_AUDIT}' AS audited, e.discarded_at IS NOT NULL AS discarded
    FROM outbox_event e JOIN fault_emitted em ON em.event_id = e.id
    WHERE em.kind IN ('ordered', 'ordered-poison')
  ),
  placed AS (
    SELECT ev.*,
           max(released_at) OVER earlier AS earlier_released,
           coalesce(bool_or(released_at IS NULL) OVER earlier, false) AS earlier_unreleased,
           lag(seq) OVER (PARTITION BY key, producer ORDER BY pos) AS producer_prev_seq
    FROM ev
    WINDOW earlier AS (PARTITION BY key ORDER BY pos ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
  ),
  died AS (SELECT * FROM unnest($1::int[], $2::float8[]) AS d(pid, exited_ms)),
  runs AS (
    SELECT c.id, c.event_id, c.pid, c.at, c.effect, c.ended_at, d.exited_ms,
           p.key, p.pos, p.occurred_at, p.earlier_released, p.earlier_unreleased,
           coalesce(c.ended_at, to_timestamp(d.exited_ms / 1000), 'infinity') AS ended
    FROM fault_call c
    JOIN placed p ON p.id = c.event_id
    LEFT JOIN died d ON d.pid = c.pid
    WHERE c.handler = '${HANDLER_LEDGER}'
  ),
  timed AS (
    SELECT runs.*,
           max(ended) OVER (PARTITION BY key ORDER BY at, id
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS busy_until,
           earlier_unreleased OR at + interval '1 ms' <= earlier_released AS early
    FROM runs
  ),
  flagged AS (
    SELECT timed.*, at + interval '1 ms' <= busy_until AS overlapped FROM timed
  )`;

const FINDINGS = `
  WITH ${RUNS},
  delivered AS (
    SELECT p.id, p.key, p.pos,
           (SELECT max(r.at) FROM runs r
            WHERE r.event_id = p.id AND r.effect IN ('done', 'repeat')
              AND r.at <= p.delivered_at) AS started
    FROM placed p WHERE p.delivered_at IS NOT NULL
  ),
  handoffs AS (
    SELECT extract(epoch FROM min(at) - min(earlier_released)) * 1000 AS ms
    FROM runs WHERE occurred_at < earlier_released
    GROUP BY event_id
  ),
  sequenced AS (
    SELECT key, row_number() OVER (PARTITION BY key ORDER BY pos) AS by_position,
           row_number() OVER (PARTITION BY key ORDER BY started, pos) AS by_start
    FROM delivered
  )
  SELECT
    (SELECT count(*) FROM ev)::int AS events,
    (SELECT count(DISTINCT key) FROM ev)::int AS keys,
    (SELECT count(*) FROM ev WHERE key IS NULL OR pos IS NULL)::int AS unplaced,
    (SELECT count(*) FROM placed WHERE seq < producer_prev_seq)::int AS placed_against_commits,
    (SELECT count(*) FROM flagged WHERE early)::int AS early_starts,
    (SELECT count(*) FROM flagged WHERE overlapped)::int AS overlaps,
    (SELECT count(*) FROM runs WHERE ended_at IS NULL AND exited_ms IS NULL)::int AS unfinished,
    (SELECT count(*) FROM runs WHERE ended_at IS NULL AND exited_ms IS NOT NULL)::int AS killed_runs,
    (SELECT count(*) FROM runs WHERE effect = 'failed')::int AS failed_runs,
    (SELECT count(DISTINCT key) FROM sequenced WHERE by_position <> by_start)::int AS keys_out_of_order,
    (SELECT count(*) FROM delivered WHERE started IS NULL)::int AS delivered_unseen,
    (SELECT count(*) FROM ev WHERE released_at IS NULL)::int AS unreleased,
    (SELECT count(*) FROM ev WHERE discarded)::int AS discarded,
    (SELECT count(*) FROM ev WHERE NOT audited)::int AS unaudited,
    (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) FROM handoffs)::float8 AS handoff_median,
    (SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) FROM handoffs)::float8 AS handoff_p99,
    (SELECT max(ms) FROM handoffs)::float8 AS handoff_max
`;

const DETAILS = `
  WITH ${RUNS}
  SELECT format('%s %s at position %s: run by pid %s started %s, %s', key,
                CASE WHEN early THEN 'early start' ELSE 'overlap' END, pos, pid,
                to_char(at, 'HH24:MI:SS.MS'),
                CASE WHEN early
                     THEN 'earlier events released ' ||
                          coalesce(to_char(earlier_released, 'HH24:MI:SS.US'), '-') ||
                          CASE WHEN earlier_unreleased THEN ' (one never)' ELSE '' END
                     ELSE 'a run of the key busy until ' || to_char(busy_until, 'HH24:MI:SS.US')
                END) AS line
  FROM flagged WHERE early OR overlapped
  ORDER BY at
  LIMIT 5
`;

export async function orderingFindings(
  db: FaultDatabase,
  killed: Array<{ pid: number; exitedAt: number }>,
): Promise<OrderingFindings> {
  const params = [killed.map((k) => k.pid), killed.map((k) => k.exitedAt)];
  const [row] = await db.query(FINDINGS, params);
  const details =
    row.early_starts + row.overlaps > 0
      ? (await db.query<{ line: string }>(DETAILS, params)).map((d) => d.line)
      : [];
  return {
    events: row.events,
    keys: row.keys,
    unplaced: row.unplaced,
    placedAgainstCommits: row.placed_against_commits,
    earlyStarts: row.early_starts,
    overlaps: row.overlaps,
    unfinished: row.unfinished,
    killedRuns: row.killed_runs,
    failedRuns: row.failed_runs,
    keysOutOfOrder: row.keys_out_of_order,
    deliveredUnseen: row.delivered_unseen,
    unreleased: row.unreleased,
    discarded: row.discarded,
    unaudited: row.unaudited,
    handoffMs: [row.handoff_median, row.handoff_p99, row.handoff_max],
    details,
  };
}
