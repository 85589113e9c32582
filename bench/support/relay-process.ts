import { spawn, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type {
  RelayCommand,
  RelayNotice,
  RelayReply,
  RelayRuns,
  RelayStats,
  RelayWorkerConfig,
  RunSpan,
} from './relay-ipc';

const ROOT = resolve(__dirname, '../..');
const WORKER = join(__dirname, 'relay-worker.ts');
const BOOT_TIMEOUT_MS = 90_000;
const OUTPUT_KEPT = 20;

function stripAnsi(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/\x1b\[[0-9;]*m/g, '');
}

/** A relay worker process (`relay-worker.ts`) and its IPC channel, seen from the bench. */
export class RelayProcess {
  /** How the process ended, once it has; a crash shows here. */
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  readonly exited: Promise<void>;
  private nextId = 0;
  private readonly pending = new Map<
    number,
    { resolve: (value: unknown) => void; reject: (error: Error) => void }
  >();
  private progressListener: (events: number) => void = () => undefined;
  private readonly output: string[] = [];
  private outputLines = 0;

  private constructor(private readonly child: ChildProcess) {
    // The relay's log stays out of the bench's output; `describeOutput` sums it up.
    for (const stream of [child.stdout, child.stderr]) {
      if (!stream) continue;
      createInterface({ input: stream }).on('line', (line: string) => {
        if (!line.trim()) return;
        this.outputLines++;
        if (this.output.length < OUTPUT_KEPT) this.output.push(stripAnsi(line));
      });
    }
    this.exited = new Promise((done) =>
      child.once('exit', (code, signal) => {
        this.exit = { code, signal };
        for (const { reject } of this.pending.values()) {
          reject(new Error(`relay worker exited (code ${code}, signal ${signal})`));
        }
        this.pending.clear();
        done();
      }),
    );
    child.on('message', (message: RelayNotice | RelayReply) => {
      if ('notice' in message) {
        if (message.notice === 'progress') this.progressListener(message.events);
        return;
      }
      const waiter = this.pending.get(message.id);
      this.pending.delete(message.id);
      if (message.ok) waiter?.resolve(message.result);
      else waiter?.reject(new Error(message.error));
    });
  }

  /** Starts a worker and waits until it has booted. */
  static async spawn(config: RelayWorkerConfig): Promise<RelayProcess> {
    const child = spawn(
      process.execPath,
      ['-r', require.resolve('ts-node/register/transpile-only'), WORKER],
      {
        cwd: ROOT,
        env: { ...process.env, BENCH_RELAY_WORKER: JSON.stringify(config) },
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      },
    );
    const relay = new RelayProcess(child);
    const ready = new Promise<void>((done, fail) => {
      const timer = setTimeout(
        () => fail(new Error('relay worker did not boot in time')),
        BOOT_TIMEOUT_MS,
      );
      child.on('message', (message: RelayNotice | RelayReply) => {
        if (!('notice' in message)) return;
        if (message.notice === 'ready') {
          clearTimeout(timer);
          done();
        } else if (message.notice === 'failed') {
          clearTimeout(timer);
          fail(new Error(`relay worker failed to boot: ${message.error}`));
        }
      });
      void relay.exited.then(() => {
        clearTimeout(timer);
        fail(new Error(`relay worker exited during boot (${JSON.stringify(relay.exit)})`));
      });
    });
    try {
      await ready;
    } catch (error) {
      relay.kill();
      const output = relay.describeOutput();
      throw output ? new Error(`${(error as Error).message}; ${output}`) : error;
    }
    return relay;
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** What the relay logged, in one line: how many lines and the first of them; or undefined. */
  describeOutput(): string | undefined {
    if (this.outputLines === 0) return undefined;
    const first = this.output[0].trim();
    const shown = first.length > 200 ? `${first.slice(0, 197)}...` : first;
    return `the relay logged ${this.outputLines} line(s), the first: ${shown}`;
  }

  onProgress(listener: (events: number) => void): void {
    this.progressListener = listener;
  }

  start(): Promise<void> {
    return this.request('start') as Promise<void>;
  }

  stats(): Promise<RelayStats> {
    return this.request('stats') as Promise<RelayStats>;
  }

  runs(): Promise<RelayRuns> {
    return this.request('runs') as Promise<RelayRuns>;
  }

  /** Each run's start and end, for a handler that reports its end. */
  spans(): Promise<RunSpan[]> {
    return this.request('spans') as Promise<RunSpan[]>;
  }

  /** Asks the worker to shut down, and kills it if it has not within `timeoutMs`. */
  async close(timeoutMs = 20_000): Promise<void> {
    if (this.exit) return;
    const timer = setTimeout(() => this.kill(), timeoutMs);
    await this.request('close').catch(() => undefined);
    await this.exited;
    clearTimeout(timer);
  }

  kill(): void {
    if (!this.exit) this.child.kill('SIGKILL');
  }

  private request(cmd: RelayCommand): Promise<unknown> {
    if (this.exit) return Promise.reject(new Error('relay worker has exited'));
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ id, cmd });
    });
  }
}
