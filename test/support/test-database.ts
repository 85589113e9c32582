import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { OUTBOX_ENTITIES } from '../../libs/outbox/src/store/outbox-event.entity';
import { dropDatabase, withAdminClient } from './admin-client';
import { withDatabase } from './database-url';
import { libraryUrl } from './pooler';
import { ADMIN_URL_ENV, TEMPLATE_ENV, requireRunEnv } from './test-run';

export interface TestDatabase {
  name: string;
  /** What the library connects to: through the pooler when the run has one (see pooler.ts). */
  url: string;
  /** The server itself, always: for what needs a session or the server's own view. */
  directUrl: string;
  /** Initialised; schema comes from the migrated template, never from `synchronize`. */
  dataSource: DataSource;
  /** A new connected client on `directUrl`, ended by close(); for sessions a test holds itself. */
  connect(): Promise<Client>;
  /** Ends tracked clients, destroys the data source and drops the database. */
  close(): Promise<void>;
}

/**
 * A private, migrated database for one test file, copied from the run's template. Call it in
 * beforeAll and close() in afterAll; files never share rows, so they can run in parallel.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = requireRunEnv(ADMIN_URL_ENV);
  const template = requireRunEnv(TEMPLATE_ENV);
  // The template's name as prefix is what lets global teardown find copies a crash left behind.
  const name = `${template}_${randomBytes(4).toString('hex')}`;
  const directUrl = withDatabase(adminUrl, name);
  const url = libraryUrl(directUrl);

  await withAdminClient(adminUrl, (client) =>
    client.query(
      `CREATE DATABASE ${client.escapeIdentifier(name)} TEMPLATE ${client.escapeIdentifier(template)}`,
    ),
  );

  const dataSource = new DataSource({
    type: 'postgres',
    url,
    entities: [...OUTBOX_ENTITIES],
    synchronize: false,
    logging: false,
    // Room for concurrent claimers in one test without exhausting max_connections when files
    // run in parallel.
    poolSize: 10,
  });
  try {
    await dataSource.initialize();
  } catch (error) {
    await withAdminClient(adminUrl, (client) => dropDatabase(client, name));
    throw error;
  }

  const clients = new Set<Client>();

  return {
    name,
    url,
    directUrl,
    dataSource,
    async connect() {
      const client = new Client({ connectionString: directUrl });
      await client.connect();
      clients.add(client);
      return client;
    },
    async close() {
      // allSettled: a client a test already ended must not stop the rest of the cleanup.
      await Promise.allSettled([...clients].map((client) => client.end()));
      clients.clear();
      if (dataSource.isInitialized) {
        await dataSource.destroy();
      }
      await withAdminClient(adminUrl, (client) => dropDatabase(client, name));
    },
  };
}

/**
 * The file's database and a client on it, made before its tests and dropped after them: the
 * setup most SQL suites start with. Read `.db` and `.sql` inside tests and hooks.
 */
export function useTestDatabase(): { readonly db: TestDatabase; readonly sql: Client } {
  let db: TestDatabase | undefined;
  let sql: Client | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
    sql = await db.connect();
  });
  afterAll(async () => {
    await db?.close();
  });
  const ready = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('useTestDatabase: read before its beforeAll ran');
    return value;
  };
  return {
    get db() {
      return ready(db);
    },
    get sql() {
      return ready(sql);
    },
  };
}
