import type { OutboxModuleOptions } from '@app/outbox';
import type { ProducerOptions } from './children';
import type { FaultDatabase } from './database';
import type { Tally } from './counts';
import type { FaultBridgeConfig } from './ipc';
import type { PgServer } from './pg-server';
import type { FaultChild } from './processes';

export interface WorkerOptions {
  /** Merged over the suite's defaults (`listen` and `retry` field by field). */
  outbox?: OutboxModuleOptions;
  /** Where the outbox's connections go; the scenario's database by default. */
  url?: string;
  handlerDelayMs?: number;
  /** Leave the dispatcher stopped until the runner sends `start-dispatcher`. */
  holdDispatcher?: boolean;
  /** Serve `/health` and `/health/live` over HTTP on this port (see ChildConfig). */
  httpPort?: number;
  /** Where handlers record calls and effects; the scenario's database by default. */
  recordUrl?: string;
  /** A relay and/or an inbox (see ChildConfig). */
  bridge?: FaultBridgeConfig;
}

export interface ScenarioContext {
  server: PgServer;
  db: FaultDatabase;
  quick: boolean;
  breakMode: string | undefined;
  /** Spawns a worker and waits until it booted. */
  worker(label: string, options?: WorkerOptions): Promise<FaultChild>;
  /** Spawns a worker without waiting for it. */
  spawnWorker(label: string, options?: WorkerOptions): FaultChild;
  /** Spawns a producer and waits until it booted. */
  producer(options?: ProducerOptions): Promise<FaultChild>;
  /**
   * Workers and producers of the previous release (`Scenario.previousRelease`), whose schema the
   * scenario's database then starts at.
   */
  previous?: {
    version: string;
    worker(label: string, options?: WorkerOptions): Promise<FaultChild>;
    producer(options?: ProducerOptions): Promise<FaultChild>;
  };
  /** A progress line, printed as the scenario runs. */
  note(text: string): void;
}

export interface Scenario {
  /** Used with `--only`. */
  name: string;
  title: string;
  /** Runs the previous release beside this code: see `ScenarioContext.previous`. */
  previousRelease?: boolean;
  run(ctx: ScenarioContext, outcome: Outcome): Promise<void>;
}

export interface Check {
  what: string;
  ok: boolean;
  actual: string;
}

/** The columns of the final summary. */
export interface Summary {
  produced?: number;
  lost?: number;
  duplicates?: number;
  extraCalls?: number;
  recover?: string;
}

/** What a scenario measured (figures) and asserted (checks). */
export class Outcome {
  readonly figures: Array<[string, string]> = [];
  readonly checks: Check[] = [];
  readonly summary: Summary = {};
  /** Longer explanations printed under the tables (why a worker crashed, for instance). */
  readonly notes: string[] = [];

  figure(name: string, value: string | number): void {
    this.figures.push([name, typeof value === 'number' ? formatNumber(value) : value]);
  }

  note(text: string): void {
    this.notes.push(text);
  }

  check(what: string, ok: boolean, actual: string | number): void {
    this.checks.push({
      what,
      ok,
      actual: typeof actual === 'number' ? formatNumber(actual) : actual,
    });
  }

  checkZero(what: string, actual: number): void {
    this.check(what, actual === 0, actual);
  }

  /**
   * The figures every scenario reports, and the counts that must be zero. A scenario that tallies
   * several runs names each (`label`, before every line); the summary adds them up.
   */
  tally(t: Tally, options: { deadExpected?: boolean; label?: string } = {}): void {
    const name = (text: string) => (options.label ? `${options.label}: ${text.trim()}` : text);
    this.figure(name('produced'), t.produced);
    this.figure(name('handler calls'), t.calls);
    this.figure(name('extra calls (reruns before a recorded delivery)'), t.extraCalls);
    this.figure(name('  of which found the effect already done'), t.repeats);
    this.figure(name('calls cut short (no effect recorded)'), t.cutShort);
    this.checkZero(name('lost events'), t.lost);
    this.checkZero(
      name('duplicate deliveries (call after recorded delivery)'),
      t.duplicateDeliveries,
    );
    this.checkZero(name('duplicate effects'), t.duplicateEffects);
    this.checkZero(name('live rows left after the drain'), t.stillLive);
    if (!options.deadExpected) this.checkZero(name('dead events'), t.dead);
    for (const line of t.duplicateDetails) this.note(name(line));
    const { summary } = this;
    Object.assign(summary, {
      produced: (summary.produced ?? 0) + t.produced,
      lost: (summary.lost ?? 0) + t.lost,
      duplicates: (summary.duplicates ?? 0) + t.duplicateDeliveries + t.duplicateEffects,
      extraCalls: (summary.extraCalls ?? 0) + t.extraCalls,
    });
  }

  get passed(): boolean {
    return this.checks.length > 0 && this.checks.every((c) => c.ok);
  }
}

export function formatNumber(value: number): string {
  return Number.isInteger(value) ? value.toLocaleString('en-US') : value.toFixed(1);
}

export function ms(value: number | null | undefined): string {
  if (value === Infinity) return 'never';
  if (value === null || value === undefined || !Number.isFinite(value)) return 'n/a';
  return value >= 10_000 ? `${(value / 1000).toFixed(1)} s` : `${Math.round(value)} ms`;
}
