import type { DataSource } from 'typeorm';

/**
 * The warning the engine logs at start when the DataSource sets no connect timeout, or null
 * when it sets one. The outbox bounds its own statements, but a new pool connection to a database
 * that stopped answering waits as long as the driver lets it: without a connect timeout, forever,
 * and closing the DataSource at shutdown waits for it too.
 */
export function connectTimeoutWarning(dataSource: DataSource): string | null {
  const options = dataSource.options as {
    connectTimeoutMS?: number;
    extra?: { connectionTimeoutMillis?: number };
  };
  if (options.connectTimeoutMS || options.extra?.connectionTimeoutMillis) return null;
  return (
    'The DataSource sets no connect timeout: a new connection to a database that stops ' +
    'answering waits forever, and so does closing the app. Set connectTimeoutMS ' +
    '(for example 5000) in the TypeORM options.'
  );
}
