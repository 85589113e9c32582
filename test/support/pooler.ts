import { withDatabase } from './database-url';
import { ADMIN_URL_ENV } from './test-run';

/**
 * The harness switch for runs behind a transaction pooler (`.ci/run` sets it to a PgBouncer in
 * `pool_mode = transaction` in front of the run's server). When set, what the library uses goes
 * through the pooler: the per-file database's `dataSource` and `url` (so the apps, and the CLI
 * given `DATABASE_URL`, connect through it), while the apps built by `createOutboxApp` LISTEN on
 * the direct URL (`listen.connectionString`), as the README recommends. Everything the harness
 * does for itself stays direct: creating and dropping databases, the template, and the sessions
 * a test holds itself (`db.connect()`, `db.directUrl`). Any database name on the pooler must
 * reach the same server (PgBouncer's `*` entry).
 */
export const POOLER_URL_ENV = 'OUTBOX_TEST_POOLER_URL';

export function poolerUrl(): string | undefined {
  return process.env[POOLER_URL_ENV] || undefined;
}

/** The URL the library gets for database `directUrl`: the same database through the pooler. */
export function libraryUrl(directUrl: string): string {
  const pooler = poolerUrl();
  return pooler ? withDatabase(pooler, databaseName(directUrl)) : directUrl;
}

/** The direct URL of a database `url` reaches through the pooler; undefined when it is direct. */
export function directUrlBehind(url: string): string | undefined {
  const pooler = poolerUrl();
  const adminUrl = process.env[ADMIN_URL_ENV];
  if (!pooler || !adminUrl || new URL(url).host !== new URL(pooler).host) return undefined;
  return withDatabase(adminUrl, databaseName(url));
}

function databaseName(url: string): string {
  return decodeURIComponent(new URL(url).pathname.slice(1));
}
