import type { ClientConfig } from 'pg';
import type { DataSource } from 'typeorm';

/** Options of pg's Pool that mean nothing to one client. */
const POOL_ONLY = [
  'max',
  'min',
  'idleTimeoutMillis',
  'maxUses',
  'maxLifetimeSeconds',
  'allowExitOnIdle',
  'log',
];

/**
 * Connection settings for the LISTEN client, built as TypeORM builds its pool's: the
 * DataSource's credentials and `ssl`, then its `extra` on top (TLS material,
 * keepalive, `options`, whatever the app's connections need), less the pool-only keys. With an
 * explicit `connectionString` (a direct connection beside a transaction pooler), the string names
 * the server and the credentials, and the rest still comes from the DataSource. The client's
 * `application_name` is always `outbox-listener`, so operators can tell its backend apart; its
 * timeouts are the `listen` options' (see `PgListener`).
 */
export function listenerClientConfig(
  dataSource: DataSource,
  connectionString?: string,
): ClientConfig {
  const options = dataSource.options as {
    url?: string;
    host?: string;
    port?: number;
    username?: string;
    password?: string | (() => string | Promise<string>);
    database?: string;
    ssl?: ClientConfig['ssl'];
    extra?: Record<string, unknown>;
  };
  const server: ClientConfig = connectionString
    ? { connectionString }
    : {
        connectionString: options.url,
        host: options.host,
        port: options.port,
        user: options.username,
        password: options.password,
        database: options.database,
      };
  const extra = { ...options.extra };
  for (const key of POOL_ONLY) delete extra[key];
  return {
    ...server,
    ssl: options.ssl,
    ...(extra as ClientConfig),
    ...(connectionString ? { connectionString } : {}),
    application_name: 'outbox-listener',
  };
}
