import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { chown, mkdtemp } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { findFreePort } from '../../support/free-port';
import { postgresOwner, type PgServer } from './pg-server';
import { sleep } from './processes';

/**
 * A PgBouncer in transaction mode in front of the suite's server, which a scenario restarts and
 * pauses under load. Its port stays the same across restarts, as a pooler's service address
 * does. It needs Debian's `pgbouncer` (.ci/run installs it), and runs as `postgres` when this
 * process is root (PgBouncer refuses to run as root).
 */
export interface Pooler {
  readonly port: number;
  /** URL of database `name` through the pooler, as the server's superuser. */
  url(name: string): string;
  /** Stops PgBouncer at once (SIGTERM: its connections are cut) and starts it again. */
  restart(downMs: number): Promise<void>;
  /** PAUSE: waits for the transactions running through it, then holds every new one. */
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** Client connections to database `name` the pooler holds now (SHOW CLIENTS). */
  clients(name: string): Promise<number>;
  stop(): void;
}

const USER = 'postgres';

export async function startPooler(server: PgServer): Promise<Pooler> {
  const found = spawnSync('pgbouncer', ['--version'], { encoding: 'utf8' });
  if (found.error || found.status !== 0) {
    throw new Error(
      'this scenario needs PgBouncer: apt-get install pgbouncer (.ci/run installs it)',
    );
  }
  const owner = postgresOwner();
  const dir = await mkdtemp(join(tmpdir(), 'outbox-faults-pgbouncer-'));
  const port = await findFreePort();
  const ini = join(dir, 'pgbouncer.ini');
  const pidFile = join(dir, 'pgbouncer.pid');
  writeFileSync(join(dir, 'userlist.txt'), `"${USER}" ""\n`);
  writeFileSync(
    ini,
    [
      '[databases]',
      `* = host=127.0.0.1 port=${server.port}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      `admin_users = ${USER}`,
      'pool_mode = transaction',
      'default_pool_size = 40',
      'max_client_conn = 400',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      `pidfile = ${pidFile}`,
      '',
    ].join('\n'),
  );
  if (owner) {
    for (const file of ['', 'pgbouncer.ini', 'userlist.txt']) {
      await chown(join(dir, file), owner.uid, owner.gid);
    }
  }
  const run = () => {
    const command = ['pgbouncer', '-d', '-q', ini];
    execFileSync(
      owner ? 'runuser' : command[0],
      owner ? ['-u', USER, '--', ...command] : command.slice(1),
    );
  };
  const pid = (): number | undefined => {
    try {
      return Number(readFileSync(pidFile, 'utf8').trim());
    } catch {
      return undefined;
    }
  };
  const kill = async () => {
    const running = pid();
    if (running === undefined) return;
    try {
      process.kill(running, 'SIGTERM');
    } catch {
      return;
    }
    for (let i = 0; i < 100 && isAlive(running); i++) await sleep(50);
  };
  run();
  await listening(port);
  const admin = async (command: string) => {
    const client = new Client({ host: '127.0.0.1', port, user: USER, database: 'pgbouncer' });
    await client.connect();
    try {
      return (await client.query<Record<string, unknown>>(command)).rows;
    } finally {
      await client.end();
    }
  };
  return {
    port,
    url: (name) => `postgres://${USER}@127.0.0.1:${port}/${encodeURIComponent(name)}`,
    async restart(downMs) {
      await kill();
      await sleep(downMs);
      run();
      await listening(port);
    },
    pause: async () => void (await admin('PAUSE')),
    resume: async () => void (await admin('RESUME')),
    clients: async (name) =>
      (await admin('SHOW CLIENTS')).filter((c) => c.database === name).length,
    stop() {
      const running = pid();
      if (running !== undefined && isAlive(running)) process.kill(running, 'SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function listening(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await sleep(50);
  }
  throw new Error(`no PgBouncer listening on 127.0.0.1:${port}`);
}
