import { firstCallAt, firstCallBy } from './counts';
import type { FaultDatabase } from './database';
import type { HealthWatch } from './health';
import { sleep, waitUntil, type FaultChild } from './processes';

/** `application_name` of the outbox's LISTEN connection (see listenerClientConfig). */
const LISTENER_APPLICATION_NAME = 'outbox-listener';

/**
 * LISTEN connections of the outbox on `db`'s database that are listening: their backend ran
 * the LISTEN (or a probe since, the only other statement such a connection runs).
 */
async function listenerSessions(db: FaultDatabase): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
     WHERE datname = current_database() AND application_name = $1
       AND (query ILIKE 'listen %' OR query = 'select 1')`,
    [LISTENER_APPLICATION_NAME],
  );
  return row.n;
}

/**
 * When the first, the second, ... up to `count` LISTEN connections were listening on `db`'s
 * database (`Date.now()` ms, polled every 50 ms); null for those not there within `timeoutMs`.
 */
export async function listenersBack(
  db: FaultDatabase,
  count: number,
  timeoutMs: number,
): Promise<(number | null)[]> {
  const times: (number | null)[] = Array.from({ length: count }, () => null);
  await waitUntil(
    async () => {
      const listening = await listenerSessions(db).catch(() => 0);
      for (let i = 0; i < Math.min(listening, count); i++) times[i] ??= Date.now();
      return listening >= count;
    },
    timeoutMs,
    50,
  );
  return times;
}

/**
 * The first number `probe` resolved to (a `Date.now()` time), polled every `everyMs`, or null
 * after `timeoutMs`. A probe that throws (the database gone a moment) counts as not yet.
 */
export async function whenFirst(
  probe: () => Promise<number | null>,
  timeoutMs: number,
  everyMs = 100,
): Promise<number | null> {
  let at: number | null = null;
  await waitUntil(async () => (at = await probe().catch(() => null)) !== null, timeoutMs, everyMs);
  return at;
}

/** When `worker` first started a handler call after `sinceMs`; null if it crashed or timed out. */
export function firstCallOf(
  records: FaultDatabase,
  worker: FaultChild,
  sinceMs: number,
  timeoutMs: number,
): Promise<number | null> {
  return whenFirst(
    async () => (worker.crashed ? Infinity : firstCallBy(records, worker.pid, sinceMs)),
    timeoutMs,
  ).then((at) => (at === Infinity ? null : at));
}

/** When the first handler call of `eventId` started; null after `timeoutMs`. */
export function firstCallOfEvent(
  records: FaultDatabase,
  eventId: string,
  timeoutMs: number,
): Promise<number | null> {
  return whenFirst(() => firstCallAt(records, eventId), timeoutMs);
}

/** When no live outbox row is left on `db` (every event delivered or dead); null after `timeoutMs`. */
export function whenDrained(db: FaultDatabase, timeoutMs: number): Promise<number | null> {
  return whenFirst(
    async () => {
      const [row] = await db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM outbox_event WHERE dispatched_at IS NULL AND dead_at IS NULL',
      );
      return row.n === 0 ? Date.now() : null;
    },
    timeoutMs,
    50,
  );
}

/**
 * When the last of the events committed before `beforeMs` was delivered (`Date.now()` ms), from
 * the outbox's own `dispatched_at`; null while one of them is still live.
 */
export async function lastDeliveredOf(db: FaultDatabase, beforeMs: number): Promise<number | null> {
  const [row] = await db.query<{ at: number | null; live: number }>(
    `SELECT (extract(epoch FROM max(dispatched_at)) * 1000)::float8 AS at,
            count(*) FILTER (WHERE dispatched_at IS NULL AND dead_at IS NULL)::int AS live
     FROM outbox_event WHERE occurred_at < to_timestamp($1 / 1000.0)`,
    [beforeMs],
  );
  return row.live > 0 ? null : row.at;
}

/** The `occurred_at` of `eventId` on `db` (its emitting transaction's start), in `Date.now()` ms. */
export async function occurredAt(db: FaultDatabase, eventId: string): Promise<number | null> {
  const [row] = await db.query<{ at: number | null }>(
    'SELECT (extract(epoch FROM occurred_at) * 1000)::float8 AS at FROM outbox_event WHERE id = $1',
    [eventId],
  );
  return row?.at ?? null;
}

/** Of `ids`, how many have no `fault_emitted` row on `db`: acknowledged commits it lacks. */
export async function missingEmits(db: FaultDatabase, ids: string[]): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM unnest($1::uuid[]) AS acked(id)
     WHERE NOT EXISTS (SELECT 1 FROM fault_emitted em WHERE em.event_id = acked.id)`,
    [ids],
  );
  return row.n;
}

/** The tables `copyProduced` carries over: what was produced, and the outbox's record of it. */
const PRODUCED_TABLES = ['fault_emitted', 'outbox_event'] as const;

/**
 * Copies the `fault_emitted` and `outbox_event` rows of `from` into the tables of the same name
 * in `to`, emptied first, so that `tally(to)` counts the events `from` holds against the calls
 * and effects the handlers recorded in `to`. Both databases have the suite's schema.
 */
export async function copyProduced(from: FaultDatabase, to: FaultDatabase): Promise<void> {
  await to.query(`TRUNCATE ${PRODUCED_TABLES.join(', ')}`);
  for (const table of PRODUCED_TABLES) {
    const [{ rows }] = await from.query<{ rows: string }>(
      `SELECT coalesce(json_agg(t), '[]')::text AS rows FROM ${table} t`,
    );
    await to.query(
      `INSERT INTO ${table} SELECT * FROM json_populate_recordset(null::${table}, $1::json)`,
      [rows],
    );
  }
}

/** Empties what a run of a scenario recorded in the suite's database, for the next run. */
export async function clearRecords(db: FaultDatabase): Promise<void> {
  await db.query(`TRUNCATE ${PRODUCED_TABLES.join(', ')}, fault_call, fault_effect`);
}

/** A worker's readiness around a fault: the first `down` at or after `sinceMs`, the `up` after it. */
export function healthAround(
  watch: HealthWatch,
  sinceMs: number,
): { downAt: number | null; upAt: number | null } {
  const down = watch.first('down', sinceMs);
  const up = down ? watch.first('up', down.at) : undefined;
  return { downAt: down?.at ?? null, upAt: up?.at ?? null };
}

/** Sleeps until `atMs` (`Date.now()` ms); at once if it has passed. */
export function sleepUntil(atMs: number): Promise<void> {
  return sleep(Math.max(0, atMs - Date.now()));
}
