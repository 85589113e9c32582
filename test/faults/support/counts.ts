import type { FaultDatabase } from './database';

/**
 * What happened to the events a scenario produced, counted from the database alone.
 *
 * - produced: committed `fault_emitted` rows (written in the emitting transaction).
 * - lost: produced events lacking the effect of a handler that should have run (both handlers
 *   for `work` and `slow` events; `fault-a` for poison events, whose `fault-b` always fails;
 *   likewise `fault-ledger` and `fault-audit` for `ordered` ones), or without their outbox row.
 * - duplicate deliveries: calls of a handler for an event that started after that handler was
 *   recorded in the event's `deliveries`. A recorded delivery must never run again.
 * - duplicate effects: effects beyond the first for a (handler, event). Handlers check before
 *   adding, so reruns one after another never add one; only two runs at once (or a broken
 *   handler) do.
 * - extra calls: further calls of a (handler, event) before its delivery was recorded: reruns
 *   after a crash, a killed connection or a lost settle. Expected and reported, not failures.
 *   The failing handler of a poison event is left out: its reruns are its attempts. Calls
 *   that failed on purpose (`effect = 'failed'`) are neither cut short nor repeats.
 * - repeats: extra calls that found the effect already there (idempotency absorbed them).
 * - cut short: calls recorded but never finished (the process or connection died meanwhile).
 */
export interface Tally {
  produced: number;
  lost: number;
  duplicateDeliveries: number;
  duplicateEffects: number;
  extraCalls: number;
  repeats: number;
  cutShort: number;
  calls: number;
  dead: number;
  stillLive: number;
  /** The first duplicate deliveries, one line each, to explain a failure. */
  duplicateDetails: string[];
}

const EXPECTED = `CASE em.kind WHEN 'poison' THEN ARRAY['fault-a'] WHEN 'tx' THEN ARRAY['fault-tx']
                  WHEN 'ordered' THEN ARRAY['fault-ledger', 'fault-audit']
                  WHEN 'ordered-poison' THEN ARRAY['fault-audit']
                  WHEN 'limited' THEN ARRAY['fault-limited']
                  ELSE ARRAY['fault-a', 'fault-b'] END`;

const TALLY = `
  WITH
  produced AS (SELECT count(*)::int AS n FROM fault_emitted),
  lost AS (
    SELECT count(*)::int AS n
    FROM fault_emitted em
    WHERE NOT EXISTS (SELECT 1 FROM outbox_event e WHERE e.id = em.event_id)
       OR EXISTS (
         SELECT 1 FROM unnest(${EXPECTED}) AS h(handler)
         WHERE NOT EXISTS (
           SELECT 1 FROM fault_effect f WHERE f.handler = h.handler AND f.event_id = em.event_id))
  ),
  duplicate_deliveries AS (
    SELECT count(*)::int AS n
    FROM fault_call c
    JOIN outbox_event e ON e.id = c.event_id
    WHERE e.deliveries ? c.handler
      AND c.at > (e.deliveries ->> c.handler)::timestamptz
  ),
  duplicate_effects AS (
    SELECT coalesce(sum(n - 1), 0)::int AS n
    FROM (SELECT count(*) AS n FROM fault_effect GROUP BY handler, event_id) AS pairs
  ),
  counted_calls AS (
    SELECT c.*
    FROM fault_call c
    LEFT JOIN fault_emitted em ON em.event_id = c.event_id
    WHERE NOT (em.kind = 'poison' AND c.handler = 'fault-b')
      AND NOT (em.kind = 'ordered-poison' AND c.handler = 'fault-ledger')
  ),
  calls AS (
    SELECT (count(*) - count(DISTINCT (handler, event_id)))::int AS beyond_first,
           count(*) FILTER (WHERE effect = 'repeat')::int AS repeats,
           count(*) FILTER (WHERE effect IS NULL)::int AS cut_short
    FROM counted_calls
  ),
  outbox AS (
    SELECT count(*) FILTER (WHERE dead_at IS NOT NULL AND dispatched_at IS NULL)::int AS dead,
           count(*) FILTER (WHERE dead_at IS NULL AND dispatched_at IS NULL)::int AS still_live
    FROM outbox_event
  )
  SELECT produced.n AS produced, lost.n AS lost,
         duplicate_deliveries.n AS duplicate_deliveries,
         duplicate_effects.n AS duplicate_effects,
         calls.beyond_first, calls.repeats, calls.cut_short,
         (SELECT count(*)::int FROM fault_call) AS calls,
         outbox.dead, outbox.still_live
  FROM produced, lost, duplicate_deliveries, duplicate_effects, calls, outbox
`;

/** Up to 5 calls that started after their handler's delivery was recorded, with their context. */
const DUPLICATE_DETAILS = `
  SELECT c.handler, c.event_id, c.pid, c.attempt, c.effect,
         to_char(c.at, 'HH24:MI:SS.US') AS call_at,
         to_char((e.deliveries ->> c.handler)::timestamptz, 'HH24:MI:SS.US') AS delivered_at,
         to_char(e.dispatched_at, 'HH24:MI:SS.US') AS dispatched_at,
         e.attempts AS event_attempts,
         (SELECT string_agg(format('%s@%s(%s)', o.pid, to_char(o.at, 'HH24:MI:SS.US'),
                                   coalesce(o.effect, '-')), ' ' ORDER BY o.at)
          FROM fault_call o WHERE o.event_id = c.event_id AND o.handler = c.handler) AS calls
  FROM fault_call c
  JOIN outbox_event e ON e.id = c.event_id
  WHERE e.deliveries ? c.handler
    AND c.at > (e.deliveries ->> c.handler)::timestamptz
  ORDER BY c.at
  LIMIT 5
`;

export async function tally(db: FaultDatabase): Promise<Tally> {
  const [row] = await db.query(TALLY);
  const details =
    row.duplicate_deliveries > 0
      ? (await db.query(DUPLICATE_DETAILS)).map(
          (d) =>
            `duplicate: ${d.handler} of ${d.event_id} by pid ${d.pid} (attempt ${d.attempt}, ` +
            `effect ${d.effect ?? '-'}) at ${d.call_at}, delivered at ${d.delivered_at}, ` +
            `dispatched ${d.dispatched_at ?? '-'}, event attempts ${d.event_attempts}; ` +
            `calls: ${d.calls}`,
        )
      : [];
  return {
    produced: row.produced,
    lost: row.lost,
    duplicateDeliveries: row.duplicate_deliveries,
    duplicateEffects: row.duplicate_effects,
    // Duplicate deliveries are calls beyond the first too; they are counted on their own.
    extraCalls: row.beyond_first - row.duplicate_deliveries,
    repeats: row.repeats,
    cutShort: row.cut_short,
    calls: row.calls,
    dead: row.dead,
    stillLive: row.still_live,
    duplicateDetails: details,
  };
}

/** Live outbox rows (neither delivered nor dead): zero once everything has drained. */
export async function liveRows(db: FaultDatabase): Promise<number> {
  const [row] = await db.query(
    'SELECT count(*)::int AS n FROM outbox_event WHERE dispatched_at IS NULL AND dead_at IS NULL',
  );
  return row.n;
}

/** Calls made by process `pid` since `sinceMs` (a `Date.now()` value; one machine, one clock). */
export async function callsBy(db: FaultDatabase, pid: number, sinceMs: number): Promise<number> {
  const [row] = await db.query(
    'SELECT count(*)::int AS n FROM fault_call WHERE pid = $1 AND at > to_timestamp($2 / 1000.0)',
    [pid, sinceMs],
  );
  return row.n;
}

/** When the first call of `eventId` started, in `Date.now()` milliseconds; null before it did. */
export async function firstCallAt(db: FaultDatabase, eventId: string): Promise<number | null> {
  const [row] = await db.query(
    'SELECT (extract(epoch FROM min(at)) * 1000)::float8 AS at FROM fault_call WHERE event_id = $1',
    [eventId],
  );
  return row.at;
}

/** When process `pid` first started a call after `sinceMs`, in `Date.now()` milliseconds. */
export async function firstCallBy(
  db: FaultDatabase,
  pid: number,
  sinceMs: number,
): Promise<number | null> {
  const [row] = await db.query(
    `SELECT (extract(epoch FROM min(at)) * 1000)::float8 AS at
     FROM fault_call WHERE pid = $1 AND at > to_timestamp($2 / 1000.0)`,
    [pid, sinceMs],
  );
  return row.at;
}

/**
 * Commit-to-handler time of `eventId`: its first call's start less its `occurred_at` (the
 * emitting transaction's start), both on the database clock; null until it is called.
 */
export async function deliveryLatency(db: FaultDatabase, eventId: string): Promise<number | null> {
  const [row] = await db.query(
    `SELECT (extract(epoch FROM min(c.at) - e.occurred_at) * 1000)::float8 AS ms
     FROM outbox_event e JOIN fault_call c ON c.event_id = e.id
     WHERE e.id = $1 GROUP BY e.occurred_at`,
    [eventId],
  );
  return row?.ms ?? null;
}

export interface LatencySpread {
  events: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
}

/**
 * One row per event emitted from $1 to $2 (`Date.now()` ms) that a handler was called for: `at`,
 * its `occurred_at`, and `ms`, its commit-to-handler time (as `deliveryLatency`).
 */
export const EMITTED_LATENCIES = `
  SELECT extract(epoch FROM e.occurred_at) * 1000 AS at,
         extract(epoch FROM min(c.at) - e.occurred_at) * 1000 AS ms
  FROM outbox_event e JOIN fault_call c ON c.event_id = e.id
  WHERE e.occurred_at >= to_timestamp($1 / 1000.0) AND e.occurred_at < to_timestamp($2 / 1000.0)
  GROUP BY e.id, e.occurred_at`;

/** Commit-to-handler times of the events emitted from `fromMs` to `toMs`: count, median, p99, max. */
export async function latencySpread(
  db: FaultDatabase,
  fromMs: number,
  toMs: number,
): Promise<LatencySpread> {
  const [row] = await db.query(
    `SELECT count(*)::int AS events,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY ms)::float8 AS p50,
            percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::float8 AS p99,
            max(ms)::float8 AS max
     FROM (${EMITTED_LATENCIES}) AS per_event`,
    [fromMs, toMs],
  );
  return { events: row.events, p50: row.p50, p99: row.p99, max: row.max };
}

/**
 * Follow-up events per transactional event: `ctx.emit` writes one in the handler's transaction,
 * so each `tx` event must have exactly one, however often its handler was cut short.
 */
export async function followUps(db: FaultDatabase): Promise<{ missing: number; extra: number }> {
  const [row] = await db.query(
    `SELECT count(*) FILTER (WHERE n = 0)::int AS missing,
            coalesce(sum(n - 1) FILTER (WHERE n > 1), 0)::int AS extra
     FROM (SELECT em.event_id,
                  (SELECT count(*) FROM outbox_event f WHERE f.causation_id = em.event_id) AS n
           FROM fault_emitted em
           WHERE em.kind = 'tx') AS per_event`,
  );
  return { missing: row.missing as number, extra: row.extra as number };
}
