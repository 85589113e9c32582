import type { ClientConfig } from 'pg';
import type { DataSource } from 'typeorm';

/**
 * Connection settings for the LISTEN client: the explicit `connectionString` when given
 * (a direct connection behind a transaction pooler), else the DataSource's own settings.
 */
export function listenerClientConfig(
  dataSource: DataSource,
  connectionString?: string,
): ClientConfig {
  const applicationName = 'outbox-listener';
  if (connectionString) return { connectionString, application_name: applicationName };
  const options = dataSource.options as {
    url?: string;
    host?: string;
    port?: number;
    username?: string;
    password?: string | (() => string | Promise<string>);
    database?: string;
    ssl?: ClientConfig['ssl'];
  };
  return {
    connectionString: options.url,
    host: options.host,
    port: options.port,
    user: options.username,
    password: options.password,
    database: options.database,
    ssl: options.ssl,
    application_name: applicationName,
  };
}
