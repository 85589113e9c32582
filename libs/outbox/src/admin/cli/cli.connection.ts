import { DataSource } from 'typeorm';
import { outboxMigrations } from '../../migrations';
import { OutboxAdmin } from '../outbox.admin';
import { AdminStore } from '../../store/admin/admin.store';

export interface ConnectionOptions {
  url: string;
  /** `statement_timeout` of each statement, in ms. */
  statementTimeoutMs: number;
  /** TypeORM's migrations table, for `migrate`. */
  migrationsTableName?: string;
}

/** What a command works with: the admin over the outbox, and the DataSource for migrations. */
export interface Connection {
  dataSource: DataSource;
  admin: OutboxAdmin;
}

const CONNECT_TIMEOUT_MS = 10_000;

/**
 * Opens a small TypeORM DataSource on the database (two connections at most, bounded connect),
 * runs `work` and closes it, whatever `work` does.
 */
export async function withConnection<T>(
  options: ConnectionOptions,
  work: (connection: Connection) => Promise<T>,
): Promise<T> {
  const dataSource = new DataSource({
    type: 'postgres',
    url: options.url,
    connectTimeoutMS: CONNECT_TIMEOUT_MS,
    // Index builds concurrently, outside a transaction: the command is how a big table migrates
    // while the app runs.
    migrations: outboxMigrations({ concurrentIndexes: true }),
    migrationsTableName: options.migrationsTableName,
    logging: false,
    extra: { max: 2, application_name: 'nestjs-lease-outbox-cli' },
  });
  await dataSource.initialize();
  try {
    const store = new AdminStore(dataSource, {
      statementTimeoutMs: options.statementTimeoutMs,
    });
    return await work({ dataSource, admin: new OutboxAdmin(store) });
  } finally {
    await dataSource.destroy();
  }
}
