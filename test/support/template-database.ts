import { DataSource } from 'typeorm';
import { OUTBOX_ENTITIES } from '../../libs/outbox/src/store/outbox-event.entity';
// The library's own list (what migrations/ lists first): global setup runs without the
// `@app/outbox` path mapping that migrations/index.ts imports through.
import { OUTBOX_MIGRATIONS } from '../../libs/outbox/src/migrations';
import { dropDatabase, withAdminClient } from './admin-client';
import { withDatabase } from './database-url';

/**
 * Creates database `name`, brings it to the latest migration, and freezes it as a template.
 * Migrating once and copying per test file is far cheaper than migrating per file, and it
 * exercises the real migrations rather than `synchronize`.
 */
export async function createTemplateDatabase(adminUrl: string, name: string): Promise<void> {
  await withAdminClient(adminUrl, (client) =>
    client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`),
  );
  try {
    const dataSource = new DataSource({
      type: 'postgres',
      url: withDatabase(adminUrl, name),
      entities: [...OUTBOX_ENTITIES],
      migrations: OUTBOX_MIGRATIONS,
      synchronize: false,
      logging: false,
    });
    await dataSource.initialize();
    try {
      // TypeORM's defaults (mode 'all'), as an app's migrationsRun has them.
      await dataSource.runMigrations();
    } finally {
      // CREATE DATABASE ... TEMPLATE refuses while any session is connected to the template.
      await dataSource.destroy();
    }
    await withAdminClient(adminUrl, (client) =>
      // ALLOW_CONNECTIONS false keeps a stray connection from breaking later copies.
      client.query(
        `ALTER DATABASE ${client.escapeIdentifier(name)} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false`,
      ),
    );
  } catch (error) {
    await dropTemplateDatabase(adminUrl, name).catch(() => undefined);
    throw error;
  }
}

/** Drops the template and every per-file copy made from it this run (they share its prefix). */
export async function dropTemplateDatabase(adminUrl: string, name: string): Promise<void> {
  await withAdminClient(adminUrl, async (client) => {
    const copies = await client.query<{ datname: string }>(
      'SELECT datname FROM pg_database WHERE starts_with(datname, $1)',
      [`${name}_`],
    );
    for (const { datname } of copies.rows) {
      await dropDatabase(client, datname);
    }
    // PostgreSQL will not drop a database still flagged as a template.
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (exists.rowCount) {
      await client.query(`ALTER DATABASE ${client.escapeIdentifier(name)} WITH IS_TEMPLATE false`);
      await dropDatabase(client, name);
    }
  });
}
