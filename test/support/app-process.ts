import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../..');
const OUTPUT_TAIL_LINES = 30;

export interface AppExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * `npm start` as a user runs it in a terminal: npm and the app it starts form a process group
 * of their own, so a test can send the whole group a Ctrl-C the way a terminal does. Output is
 * kept (without colours) to assert on and to explain a failure.
 */
export class NpmStart {
  readonly exited: Promise<AppExit>;
  exit: AppExit | undefined;
  private readonly chunks: string[] = [];

  private constructor(private readonly child: ChildProcess) {
    child.stdout!.on('data', (chunk: Buffer) => this.chunks.push(chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => this.chunks.push(chunk.toString()));
    this.exited = new Promise((done) =>
      child.once('exit', (code, signal) => done((this.exit = { code, signal }))),
    );
  }

  /** Runs `npm start` with `env` on top of this process's, DATABASE_URL removed. */
  static run(env: Record<string, string>): NpmStart {
    const base: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' };
    delete base.DATABASE_URL;
    const child = spawn('npm', ['start'], {
      cwd: ROOT,
      env: { ...base, npm_config_update_notifier: 'false', ...env },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return new NpmStart(child);
  }

  /** npm's pid, which is also the process group's id. */
  get pid(): number {
    return this.child.pid!;
  }

  get output(): string {
    return this.chunks.join('');
  }

  /** Sends `signal` to npm and the app together, as a terminal's Ctrl-C does. */
  signalGroup(signal: NodeJS.Signals): void {
    if (!this.exit) process.kill(-this.pid, signal);
  }

  /** SIGKILL for whatever of the group is still there; for clean-up. */
  kill(): void {
    try {
      process.kill(-this.pid, 'SIGKILL');
    } catch {
      // the group is gone already
    }
  }

  /**
   * Waits for `condition`, failing at once if the app exits first, and with its output either
   * way: a failed start explains itself there.
   */
  async waitFor(
    what: string,
    condition: () => boolean | Promise<boolean>,
    timeoutMs = 45_000,
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await condition())) {
      if (this.exit) throw this.failure(`exited (${JSON.stringify(this.exit)}) before ${what}`);
      if (Date.now() > deadline) throw this.failure(`timed out waiting for ${what}`);
      await sleep(50);
    }
  }

  async waitForExit(timeoutMs = 45_000): Promise<AppExit> {
    const deadline = Date.now() + timeoutMs;
    while (!this.exit) {
      if (Date.now() > deadline) throw this.failure(`did not exit within ${timeoutMs} ms`);
      await sleep(50);
    }
    return this.exit;
  }

  private failure(message: string): Error {
    const tail = this.output.trim().split('\n').slice(-OUTPUT_TAIL_LINES).join('\n');
    return new Error(`npm start ${message}; its output ended with:\n${tail}`);
  }
}

/** The pid in a data directory's postmaster.pid, if it names a live process. */
export async function livePostmaster(dataDir: string): Promise<number | undefined> {
  const text = await readFile(join(dataDir, 'postmaster.pid'), 'utf8').catch(() => '');
  const pid = Number.parseInt(text, 10);
  return Number.isInteger(pid) && pid > 0 && (await isAlive(pid)) ? pid : undefined;
}

/**
 * Stops a PostgreSQL a test left running in `dataDir` (the app killed before it could stop
 * it): an immediate shutdown, as the directory is deleted next; SIGKILL if that hangs.
 */
export async function stopPostgresIn(dataDir: string): Promise<void> {
  const pid = await livePostmaster(dataDir);
  if (pid === undefined) return;
  process.kill(pid, 'SIGQUIT');
  if (!(await gone(pid))) process.kill(pid, 'SIGKILL');
}

/** The process group of `pid`, from /proc (Linux); undefined where that cannot be read. */
export async function processGroupOf(pid: number): Promise<number | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (!stat) return undefined;
  // pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[2]);
}

/** Whether `pid` runs; a zombie (exited, not yet reaped by init) does not. */
export async function isAlive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

/**
 * Waits until `pid` is gone. PostgreSQL removes postmaster.pid, which pg_ctl waits for, a
 * moment before its process ends.
 */
export async function gone(pid: number, timeoutMs = 10_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (await isAlive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
  return true;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

/** POSTs JSON to a running app and returns the body of its 201; anything else throws. */
export async function postCreated(
  base: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<any> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  if (res.status !== 201) throw new Error(`${path} answered ${res.status}: ${await res.text()}`);
  return res.json();
}
