import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { accessSync, closeSync, constants, openSync, rmSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { connect as amqpConnect } from 'amqplib';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect } from '@nats-io/transport-node';
import { findFreePort, findFreePorts } from './free-port';

/**
 * Real message brokers for the transport suites: a nats-server with JetStream and a RabbitMQ
 * node, each a private process on free 127.0.0.1 ports with its own temporary directory, started
 * by the test itself so it can stop, kill or restart the broker mid-run. start() and restart()
 * reuse the directory and the ports, so JetStream streams and durable RabbitMQ queues (with
 * their persistent messages) survive a restart, as they would in production.
 *
 * The binaries come from Debian's packages; `bash .ci/install-brokers.sh` installs them.
 */
export interface BrokerServer {
  /** `nats://127.0.0.1:<port>` or `amqp://guest:guest@127.0.0.1:<port>`. */
  readonly url: string;
  readonly port: number;
  /** Graceful shutdown; resolves once every process of the broker has exited. */
  stop(): Promise<void>;
  /** Starts it again on the same port and directory; resolves once clients can connect. */
  start(): Promise<void>;
  restart(): Promise<void>;
  /** SIGKILL of the broker's whole process group, as a crash would. */
  kill(): Promise<void>;
  /** Stops it and deletes its directory; the server is unusable afterwards. */
  remove(): Promise<void>;
  /** The process group of the running broker (its every process), for CPU accounting. */
  readonly processGroup: number | undefined;
}

const INSTALL_HINT = 'bash .ci/install-brokers.sh installs nats-server and rabbitmq-server';
/** Lines of the broker's log quoted in a start-up failure. */
const LOG_TAIL_LINES = 60;
const NATS_START_TIMEOUT_MS = 20_000;
const RABBIT_START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 30_000;

/**
 * Process groups (and lone pids) of brokers still running. A Jest worker or script that exits
 * without remove() would otherwise leave them behind; `exit` handlers must be synchronous, so
 * they are SIGKILLed there without waiting.
 */
const liveGroups = new Set<number>();
/** Directories of brokers not yet removed, deleted by the same hook. */
const liveDirs = new Set<string>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const pid of liveGroups) {
      signalGroup(pid, 'SIGKILL');
    }
    for (const dir of liveDirs) {
      try {
        rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
      } catch {
        // Best effort: a process that was still writing may have refilled it.
      }
    }
  });
}

/** Sends `signal` to the process group led by `pid`; false when the group is already gone. */
function signalGroup(pid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function waitForGroupExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (signalGroup(pid, 0)) {
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
  return true;
}

function log(message: string): void {
  process.stderr.write(`[brokers] ${message}\n`);
}

/** The first executable among `$<envVar>`, `name` on PATH, /usr/sbin and /usr/bin, and extras. */
function findBinary(name: string, envVar: string | null, extra: string[] = []): string {
  const fromEnv = envVar ? process.env[envVar] : undefined;
  if (fromEnv) {
    if (isExecutable(fromEnv)) return fromEnv;
    throw new Error(`${envVar}=${fromEnv} is not an executable file (${INSTALL_HINT})`);
  }
  const dirs = [
    ...(process.env.PATH ?? '').split(delimiter).filter(Boolean),
    '/usr/sbin',
    '/usr/bin',
  ];
  const candidates = [...dirs.map((dir) => join(dir, name)), ...extra];
  const found = candidates.find(isExecutable);
  if (!found) {
    throw new Error(
      `no ${name} binary on PATH, in /usr/sbin or /usr/bin${envVar ? ` (or ${envVar})` : ''}: ` +
        `${INSTALL_HINT}`,
    );
  }
  return found;
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

async function logTail(file: string): Promise<string> {
  try {
    const text = await readFile(file, 'utf8');
    return text.split('\n').slice(-LOG_TAIL_LINES).join('\n');
  } catch {
    return `(no log at ${file})`;
  }
}

function tcpReachable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect(port, '127.0.0.1');
    socket.setTimeout(1_000);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(false));
  });
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** How one kind of broker is launched, probed and stopped. */
interface BrokerKind {
  name: string;
  startTimeoutMs: number;
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  /** Throws until clients can use the broker. */
  probe(): Promise<void>;
  /** Asks a running broker to shut down gracefully. */
  requestStop(pid: number): void;
}

/**
 * One broker process (group) over its lifetime: started detached so that it leads its own process
 * group, which kill() and the exit hook signal as a whole (RabbitMQ's beam.smp is a child of the
 * rabbitmq-server shell script).
 */
class ManagedBroker implements BrokerServer {
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();
  private removed = false;

  constructor(
    readonly url: string,
    readonly port: number,
    private readonly dir: string,
    private readonly logFile: string,
    private readonly kind: BrokerKind,
    private readonly cleanup: () => Promise<void> = () => Promise.resolve(),
  ) {
    liveDirs.add(dir);
    installExitHook();
  }

  get processGroup(): number | undefined {
    return this.child?.pid;
  }

  async start(): Promise<void> {
    if (this.removed) throw new Error(`${this.kind.name} on port ${this.port} was removed`);
    if (this.child) return;
    const began = Date.now();
    const fd = openSync(this.logFile, 'a');
    let child: ChildProcess;
    try {
      child = spawn(this.kind.command, this.kind.args, {
        cwd: this.dir,
        env: this.kind.env,
        detached: true,
        stdio: ['ignore', fd, fd],
      });
    } finally {
      closeSync(fd);
    }
    const pid = child.pid;
    if (pid === undefined) {
      await new Promise((resolve) => child.once('error', resolve));
      throw new Error(`${this.kind.name} (${this.kind.command}) could not be spawned`);
    }
    this.child = child;
    liveGroups.add(pid);
    installExitHook();
    // An object, not a `let`: TypeScript would narrow a local assigned only in a callback to null.
    const exit: { code: string | null } = { code: null };
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        exit.code = signal ?? String(code);
        resolve();
      });
    });

    const deadline = began + this.kind.startTimeoutMs;
    let lastError: unknown = null;
    for (;;) {
      if (exit.code !== null) {
        await this.reap();
        throw new Error(
          `${this.kind.name} exited (${exit.code}) during start-up; its log ended with:\n` +
            (await logTail(this.logFile)),
        );
      }
      try {
        if (await tcpReachable(this.port)) {
          await this.kind.probe();
          break;
        }
      } catch (error) {
        lastError = error;
      }
      if (Date.now() > deadline) {
        await this.kill();
        const last = lastError ? describe(lastError) : 'none';
        throw new Error(
          `${this.kind.name} did not accept clients on 127.0.0.1:${this.port} within ` +
            `${this.kind.startTimeoutMs} ms (last error: ${last}); ` +
            `its log ended with:\n${await logTail(this.logFile)}`,
        );
      }
      await sleep(100);
    }
    log(`${this.kind.name} started on 127.0.0.1:${this.port} in ${Date.now() - began} ms`);
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child?.pid) return;
    const began = Date.now();
    this.kind.requestStop(child.pid);
    if (!(await waitForGroupExit(child.pid, STOP_TIMEOUT_MS))) {
      log(`${this.kind.name} did not stop within ${STOP_TIMEOUT_MS} ms; killing it`);
      signalGroup(child.pid, 'SIGKILL');
    }
    await this.reap();
    log(`${this.kind.name} stopped in ${Date.now() - began} ms`);
  }

  async restart(): Promise<void> {
    const began = Date.now();
    await this.stop();
    await this.start();
    log(`${this.kind.name} restarted in ${Date.now() - began} ms`);
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (!child?.pid) return;
    signalGroup(child.pid, 'SIGKILL');
    await this.reap();
  }

  async remove(): Promise<void> {
    if (this.removed) return;
    try {
      await this.stop();
    } catch {
      await this.kill();
    }
    this.removed = true;
    await this.cleanup();
    await rm(this.dir, { recursive: true, force: true });
    liveDirs.delete(this.dir);
  }

  /** Waits for the child's exit and the rest of its group, then forgets it. */
  private async reap(): Promise<void> {
    const child = this.child;
    if (!child?.pid) return;
    await this.exited;
    if (!(await waitForGroupExit(child.pid, 5_000))) {
      signalGroup(child.pid, 'SIGKILL');
      await waitForGroupExit(child.pid, 5_000);
    }
    liveGroups.delete(child.pid);
    this.child = null;
  }
}

/**
 * A nats-server on a free 127.0.0.1 port, with JetStream storing in `<dir>/jetstream` unless
 * `jetStream: false`. Ready once a NATS client connects (and, with JetStream, its API answers).
 */
export async function startNatsServer(
  options: { jetStream?: boolean } = {},
): Promise<BrokerServer> {
  const jetStream = options.jetStream ?? true;
  const binary = findBinary('nats-server', 'NATS_SERVER_BIN');
  const dir = await mkdtemp(join(tmpdir(), 'outbox-nats-'));
  const port = await findFreePort();
  const url = `nats://127.0.0.1:${port}`;
  const args = ['-a', '127.0.0.1', '-p', String(port), '-n', `outbox-${port}`];
  if (jetStream) args.push('-js', '-sd', join(dir, 'jetstream'));

  const server = new ManagedBroker(url, port, dir, join(dir, 'nats-server.log'), {
    name: 'nats-server',
    startTimeoutMs: NATS_START_TIMEOUT_MS,
    command: binary,
    args,
    env: process.env,
    probe: async () => {
      const nc = await natsConnect({ servers: url, timeout: 2_000, reconnect: false });
      try {
        // JetStream recovers its streams before answering; a restarted server is only ready then.
        if (jetStream) await (await jetstreamManager(nc)).getAccountInfo();
      } finally {
        await nc.close();
      }
    },
    // SIGTERM: nats-server shuts down gracefully, flushing JetStream state.
    requestStop: (pid) => signalGroup(pid, 'SIGTERM'),
  });
  return startOrRemove(server);
}

/**
 * A private RabbitMQ node on free 127.0.0.1 ports: its own node name, Erlang cookie (HOME is its
 * directory), data, logs, config and enabled-plugins file (only rabbitmq_consistent_hash_exchange,
 * for the `x-consistent-hash` exchange type), and its own epmd on a free port, so neither a
 * system-wide RabbitMQ nor other tests' nodes or a leftover epmd are involved. `guest` may log in
 * from loopback, which is all the tests use. Its ports are probed free a moment before it binds
 * them: one taken meanwhile (`eaddrinuse` in its log) costs a new start on new ports, twice at
 * most.
 */
export async function startRabbitMq(): Promise<BrokerServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startRabbitMqOnce();
    } catch (error) {
      if (attempt >= 3 || !(error as Error).message.includes('eaddrinuse')) throw error;
    }
  }
}

/** One start of the node `startRabbitMq` describes. */
async function startRabbitMqOnce(): Promise<BrokerServer> {
  const binary = findBinary('rabbitmq-server', 'RABBITMQ_SERVER_BIN', [
    '/usr/lib/rabbitmq/bin/rabbitmq-server',
  ]);
  const epmdBinary = findBinary('epmd', null, ['/usr/lib/erlang/bin/epmd']);
  // Debian's /usr/sbin/rabbitmq-server is a wrapper that switches to the rabbitmq user and
  // forces HOME=/var/lib/rabbitmq and the system log files; the real script sits beside the CLI.
  const script =
    binary === '/usr/sbin/rabbitmq-server' && isExecutable('/usr/lib/rabbitmq/bin/rabbitmq-server')
      ? '/usr/lib/rabbitmq/bin/rabbitmq-server'
      : binary;

  const dir = await mkdtemp(join(tmpdir(), 'outbox-rabbit-'));
  const [port, distPort, epmdPort] = await findFreePorts(3);
  const nodeName = `outbox-${randomBytes(6).toString('hex')}@localhost`;
  const url = `amqp://guest:guest@127.0.0.1:${port}`;

  await mkdir(join(dir, 'log'));
  await writeFile(join(dir, 'enabled_plugins'), '[rabbitmq_consistent_hash_exchange].\n');
  // Temporary directories can be small on CI; the default 50 MB free-disk alarm would block
  // publishers there.
  await writeFile(join(dir, 'rabbitmq.conf'), 'disk_free_limit.absolute = 1MB\n');
  // Replaces /etc/rabbitmq/rabbitmq-env.conf, which could set another node name or port.
  await writeFile(join(dir, 'rabbitmq-env.conf'), '');

  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HOME: dir,
    RABBITMQ_NODENAME: nodeName,
    RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
    RABBITMQ_NODE_PORT: String(port),
    RABBITMQ_DIST_PORT: String(distPort),
    RABBITMQ_MNESIA_BASE: join(dir, 'mnesia'),
    RABBITMQ_LOG_BASE: join(dir, 'log'),
    RABBITMQ_ENABLED_PLUGINS_FILE: join(dir, 'enabled_plugins'),
    RABBITMQ_CONFIG_FILE: join(dir, 'rabbitmq.conf'),
    RABBITMQ_CONF_ENV_FILE: join(dir, 'rabbitmq-env.conf'),
    ERL_EPMD_PORT: String(epmdPort),
    ERL_EPMD_ADDRESS: '127.0.0.1',
  };
  // Short node names (`@localhost`), whatever the calling environment says.
  delete env.RABBITMQ_USE_LONGNAME;

  // Our own epmd, in its own process group, for the node's whole life (restarts included). The
  // VM would otherwise start a shared `epmd -daemon` on 4369 that outlives every test.
  const epmdLog = openSync(join(dir, 'epmd.log'), 'a');
  const epmd = spawn(epmdBinary, ['-port', String(epmdPort)], {
    env,
    detached: true,
    stdio: ['ignore', epmdLog, epmdLog],
  });
  closeSync(epmdLog);
  const epmdPid = epmd.pid;
  const epmdExited = new Promise<void>((resolve) => epmd.once('exit', () => resolve()));
  if (epmdPid !== undefined) liveGroups.add(epmdPid);
  installExitHook();
  const stopEpmd = async (): Promise<void> => {
    if (epmdPid === undefined) return;
    signalGroup(epmdPid, 'SIGKILL');
    await epmdExited;
    liveGroups.delete(epmdPid);
  };
  const epmdDeadline = Date.now() + 5_000;
  while (!(await tcpReachable(epmdPort))) {
    if (epmdPid === undefined || epmd.exitCode !== null || Date.now() > epmdDeadline) {
      await stopEpmd();
      const epmdOutput = await logTail(join(dir, 'epmd.log'));
      await rm(dir, { recursive: true, force: true });
      throw new Error(`epmd did not listen on 127.0.0.1:${epmdPort}:\n${epmdOutput}`);
    }
    await sleep(50);
  }

  const server = new ManagedBroker(
    url,
    port,
    dir,
    join(dir, 'rabbitmq-server.log'),
    {
      name: 'rabbitmq-server',
      startTimeoutMs: RABBIT_START_TIMEOUT_MS,
      command: script,
      args: [],
      env,
      probe: async () => {
        const connection = await amqpConnect(url);
        await connection.close();
      },
      // The script traps SIGTERM, SIGTERMs the VM and waits: the node stops gracefully (no
      // second Erlang VM for rabbitmqctl needed).
      requestStop: (pid) => {
        try {
          process.kill(pid, 'SIGTERM');
        } catch {
          // Already gone.
        }
      },
    },
    stopEpmd,
  );
  return startOrRemove(server);
}

async function startOrRemove(server: ManagedBroker): Promise<BrokerServer> {
  try {
    await server.start();
  } catch (error) {
    await server.remove().catch(() => undefined);
    throw error;
  }
  return server;
}
