import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import type { CompiledWorker } from './compile';
import type { ChildConfig, Command, Notice, Reply } from './ipc';

const ROOT = resolve(__dirname, '../../..');
/** Lines of a child's output kept to explain a failure. */
const KEPT_LINES = 400;

export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** `Date.now()` when the exit was seen. */
  at: number;
}

/** Every child not yet seen to exit, so an exit of the runner can kill them all. */
const live = new Set<FaultChild>();

/**
 * One worker or producer process, spoken to over IPC. Its output is kept (a bounded tail, and
 * a count of every line matching patterns a scenario asks about) rather than printed, so a
 * passing run stays readable and a failing one can show what the child said.
 */
export class FaultChild {
  readonly exited: Promise<ChildExit>;
  exit: ChildExit | undefined;
  /** The runner sent it a signal: an exit after that was asked for. */
  signalled = false;
  readonly notices = new Map<Notice['notice'], { at: number; notice: Notice }>();
  private readonly lines: string[] = [];
  private readonly allLines: string[] = [];
  private nextId = 1;
  private readonly pending = new Map<number, (reply: Reply) => void>();

  private constructor(
    readonly label: string,
    private readonly child: ChildProcess,
    readonly spawnedAt: number,
  ) {
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString().split('\n').filter(Boolean)) {
        this.lines.push(line);
        this.allLines.push(line);
      }
      this.lines.splice(0, Math.max(0, this.lines.length - KEPT_LINES));
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    child.on('message', (message: Notice | Reply) => {
      if ('notice' in message)
        this.notices.set(message.notice, { at: Date.now(), notice: message });
      else this.pending.get(message.id)?.(message);
    });
    this.exited = new Promise((done) =>
      child.once('exit', (code, signal) => {
        live.delete(this);
        this.exit = { code, signal, at: Date.now() };
        // Requests still waiting get a failed reply instead of waiting for their timeout.
        for (const answer of this.pending.values()) {
          answer({ id: 0, ok: false, error: `${label} exited` });
        }
        done(this.exit);
      }),
    );
  }

  /** Starts the compiled worker script with `config`. */
  static spawn(worker: CompiledWorker, label: string, config: ChildConfig): FaultChild {
    const child = spawn(process.execPath, ['-r', 'tsconfig-paths/register', worker.script], {
      cwd: ROOT,
      env: {
        ...process.env,
        TS_NODE_PROJECT: worker.project,
        FAULTS_CHILD: JSON.stringify(config),
        NO_COLOR: '1',
      },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    const faultChild = new FaultChild(label, child, Date.now());
    live.add(faultChild);
    return faultChild;
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.exit === undefined;
  }

  /** Resolves when the child reported it booted; fails if it exits first or takes too long. */
  async ready(timeoutMs = 60_000): Promise<number> {
    await this.waitForNotice('ready', timeoutMs);
    return this.notices.get('ready')!.at - this.spawnedAt;
  }

  async waitForNotice(name: Notice['notice'], timeoutMs: number): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    while (!this.notices.has(name)) {
      if (this.exit) throw this.failure(`exited (${describeExit(this.exit)}) before '${name}'`);
      if (Date.now() > deadline) throw this.failure(`sent no '${name}' within ${timeoutMs} ms`);
      await sleep(10);
    }
    return this.notices.get(name)!.at;
  }

  request<T>(command: Command, timeoutMs = 10_000): Promise<T> {
    if (this.exit) return Promise.reject(this.failure(`exited before '${command.cmd}'`));
    const id = this.nextId++;
    return new Promise<T>((resolveReply, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(this.failure(`did not answer '${command.cmd}' within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, (reply) => {
        clearTimeout(timer);
        this.pending.delete(id);
        if (reply.ok) resolveReply(reply.result as T);
        else reject(new Error(`${this.label} '${command.cmd}': ${reply.error}`));
      });
      this.child.send({ id, command });
    });
  }

  signal(signal: NodeJS.Signals): void {
    this.signalled = true;
    if (this.alive) this.child.kill(signal);
  }

  /** How long after the signal the child said it reached `name` (its own clock). */
  afterSignal(name: 'dispatcher-stopped' | 'closed'): number | undefined {
    const notice = this.notices.get(name)?.notice;
    return notice && 'afterSignalMs' in notice ? notice.afterSignalMs : undefined;
  }

  /** Exited without being asked to: a crash worth showing. */
  get crashed(): boolean {
    return this.exit !== undefined && !this.signalled;
  }

  /** Waits for the exit; SIGKILL and a failure when it takes longer than `timeoutMs`. */
  async waitForExit(timeoutMs: number): Promise<ChildExit> {
    const timer = sleep(timeoutMs).then(() => undefined);
    const exit = await Promise.race([this.exited, timer]);
    if (exit) return exit;
    this.signal('SIGKILL');
    await this.exited;
    throw this.failure(`did not exit within ${timeoutMs} ms (killed)`);
  }

  /** SIGTERM, then SIGKILL after `graceMs`; for clean-up, never fails. */
  async stop(graceMs = 15_000): Promise<void> {
    if (!this.alive) return;
    this.signal('SIGTERM');
    await this.waitForExit(graceMs).catch(() => undefined);
  }

  /** Lines of output matching `pattern`, over the whole life of the child. */
  count(pattern: RegExp): number {
    return this.allLines.filter((line) => pattern.test(line)).length;
  }

  tail(lines = 30): string {
    return this.lines.slice(-lines).join('\n');
  }

  failure(message: string): Error {
    return new Error(
      `${this.label} (pid ${this.pid}) ${message}; its output ended with:\n${this.tail()}`,
    );
  }
}

export function describeExit(exit: ChildExit): string {
  return exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`;
}

/** Kills every child still running; synchronous, for the runner's exit handler. */
export function killAllChildrenSync(): void {
  for (const child of live) child.signal('SIGKILL');
}

export function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

/** Polls `condition` every `everyMs` until it holds; false when `timeoutMs` passes first. */
export async function waitUntil(
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
  everyMs = 50,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) return false;
    await sleep(everyMs);
  }
  return true;
}
