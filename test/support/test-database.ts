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

/** What the per-file fixtures below hold; read it inside tests and hooks, not at load. */
export interface TestDatabaseFixture {
  readonly db: TestDatabase;
  /** A client of the file's own on `db.directUrl`. */
  readonly sql: Client;
}

export interface TestDatabaseFixtureOptions {
  /** Tables emptied (one TRUNCATE) before each test of the file. */
  truncateEach?: string[];
}

/**
 * The file's database and a client on it, made before its tests and dropped after them: the
 * setup most SQL suites start with. Read `.db` and `.sql` inside tests and hooks.
 */
export function useTestDatabase(options: TestDatabaseFixtureOptions = {}): TestDatabaseFixture {
  return useTestApp(() => Promise.resolve(undefined), options);
}

/** The file's database, a client on it and the app `start` makes on it. */
export interface TestAppFixture<App> extends TestDatabaseFixture {
  readonly app: App;
}

/**
 * `useTestDatabase` with an app on the database: `start` runs once the database is made, and
 * the app is closed before the database is dropped. Read `.app` inside tests and hooks.
 */
export function useTestApp<App extends { close(): Promise<unknown> } | undefined>(
  start: (db: TestDatabase) => Promise<App>,
  { truncateEach = [] }: TestDatabaseFixtureOptions = {},
): TestAppFixture<App> {
  let db: TestDatabase | undefined;
  let sql: Client | undefined;
  let app: App | undefined;
  let started = false;
  beforeAll(async () => {
    db = await createTestDatabase();
    sql = await db.connect();
    app = await start(db);
    started = true;
  });
  afterAll(async () => {
    await app?.close();
    await db?.close();
  });
  if (truncateEach.length > 0) {
    beforeEach(async () => {
      await ready(sql).query(`TRUNCATE ${truncateEach.join(', ')}`);
    });
  }
  function ready<T>(value: T | undefined): T {
    if (value === undefined) throw new Error('the test database: read before its beforeAll ran');
    return value;
  }
  return {
    get db() {
      return ready(db);
    },
    get sql() {
      return ready(sql);
    },
    get app() {
      if (!started) throw new Error('the test app: read before its beforeAll ran');
      return app as App;
    },
  };
}

/** Every column of the outbox_event row `id`, as pg reads it; undefined when there is none. */
export async function eventRow(sql: Client, id: string): Promise<any> {
  const { rows } = await sql.query('SELECT * FROM outbox_event WHERE id = $1', [id]);
  return rows[0];
}
