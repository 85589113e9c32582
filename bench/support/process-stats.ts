import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { Client } from 'pg';
import { HARNESS_APPLICATION } from './database';

/** Clock ticks per second of /proc's CPU times. */
const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** User + system CPU seconds of a process so far, from /proc/<pid>/stat; undefined if gone. */
export function processCpuSeconds(pid: number): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) may hold spaces and parentheses; fields after it are plain.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Fields 14 (utime) and 15 (stime), counted from 1 with the pid; here from field 3.
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/**
 * User + system CPU seconds so far of every live process in process group `group` (a broker
 * and its children), from /proc/<pid>/stat; what exited meanwhile is not counted.
 */
export function processGroupCpuSeconds(group: number): number {
  let seconds = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Field 5 (pgrp), counted from 1 with the pid; here from field 3.
    if (Number(fields[2]) !== group) continue;
    seconds += (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  }
  return seconds;
}

/** Resident set size of a process in bytes, from /proc/<pid>/status; undefined if gone. */
export function processRssBytes(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

function isPostgresProcess(pid: number): boolean {
  try {
    const name = readFileSync(`/proc/${pid}/comm`, 'utf8');
    return name.startsWith('postgres');
  } catch {
    return false;
  }
}

export interface BackendCpu {
  /** CPU seconds of the attributed backends between start() and stop(). */
  seconds: number;
  /** Backends seen, by application_name. */
  applications: string[];
  backends: number;
  /** Backends that exited between two samples: their CPU after the last sample is missing. */
  vanished: number;
  /** Why backends could not be attributed at all, if so. */
  unavailable?: string;
}

/**
 * CPU of the PostgreSQL backends serving a process under test: every client backend of the
 * database except the bench's own (application_name `bench-harness`), read from
 * /proc/<pid>/stat. Sampled every `intervalMs` so a backend that exits mid-run loses at most one
 * interval; one first seen after start() counts from zero (its connection set-up included).
 */
export class BackendCpuSampler {
  private readonly first = new Map<number, number>();
  private readonly last = new Map<number, number>();
  private readonly names = new Set<string>();
  private readonly gone = new Set<number>();
  private timer: NodeJS.Timeout | undefined;
  private sampling: Promise<void> | undefined;
  private unavailable: string | undefined;

  constructor(
    private readonly monitor: Client,
    private readonly serverIsLocal: boolean,
    private readonly intervalMs = 200,
  ) {}

  async start(): Promise<void> {
    if (!this.serverIsLocal) {
      this.unavailable = 'the server is not on this machine';
      return;
    }
    await this.sample(true);
    if (this.first.size > 0 && [...this.first.keys()].every((pid) => !isPostgresProcess(pid))) {
      this.unavailable = 'backend pids are not visible in this /proc (another pid namespace)';
      return;
    }
    this.timer = setInterval(() => {
      this.sampling ??= this.sample(false).finally(() => (this.sampling = undefined));
    }, this.intervalMs);
  }

  async stop(): Promise<BackendCpu> {
    clearInterval(this.timer);
    await this.sampling;
    if (!this.unavailable) await this.sample(false);
    let seconds = 0;
    for (const [pid, last] of this.last) seconds += last - (this.first.get(pid) ?? 0);
    return {
      seconds,
      applications: [...this.names].sort(),
      backends: this.last.size,
      vanished: this.gone.size,
      unavailable: this.unavailable,
    };
  }

  private async sample(initial: boolean): Promise<void> {
    const { rows } = await this.monitor.query<{ pid: number; application_name: string }>(
      `SELECT pid, application_name FROM pg_stat_activity
       WHERE datname = current_database() AND backend_type = 'client backend'
         AND pid <> pg_backend_pid() AND application_name <> $1`,
      [HARNESS_APPLICATION],
    );
    const current = new Set<number>();
    for (const { pid, application_name } of rows) {
      const cpu = processCpuSeconds(pid);
      if (cpu === undefined) continue;
      current.add(pid);
      this.names.add(application_name || '(none)');
      if (initial) this.first.set(pid, cpu);
      this.last.set(pid, cpu);
    }
    for (const pid of this.last.keys()) if (!current.has(pid)) this.gone.add(pid);
  }
}
