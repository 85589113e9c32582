/** Messages between the bench and a relay worker process (`relay-worker.ts`). */
import type { HandlerKind } from './handlers';

export interface RelayWorkerConfig {
  url: string;
  /** `module`: OutboxModule with the no-op handler; `reference`: the reference relay. */
  mode: 'module' | 'reference';
  applicationName: string;
  /** The module's handler: the no-op one unless named. */
  handler?: HandlerKind;
  /** Module options on top of BENCH_OUTBOX_OPTIONS. */
  outbox?: Record<string, unknown>;
  /** Count handler runs per event id (for reruns) and report progress every this many ids. */
  progressEvery?: number;
}

export type RelayCommand = 'start' | 'stats' | 'runs' | 'spans' | 'close';

/** One handler run's start and end, `Date.now()` of the worker (one clock per machine). */
export interface RunSpan {
  start: number;
  end: number;
}

export interface RelayRequest {
  id: number;
  cmd: RelayCommand;
}

export interface RelayStats {
  rss: number;
  heapUsed: number;
  /** process.cpuUsage() of the worker, in seconds. */
  cpuSeconds: number;
  handled: number;
}

export interface RelayRuns {
  /** Distinct event ids handled. */
  events: number;
  /** Handler runs in all. */
  runs: number;
  /** Event ids that ran more than once. */
  rerun: number;
}

export type RelayNotice =
  | { notice: 'ready'; bootMs: number }
  | { notice: 'progress'; events: number }
  | { notice: 'failed'; error: string };

export interface RelayReply {
  id: number;
  ok: boolean;
  result?: unknown;
  error?: string;
}
