import type { OutboxModuleOptions } from '@app/outbox';

/** What a child process is told at spawn, as JSON in FAULTS_CHILD. */
export interface ChildConfig {
  role: 'worker' | 'producer';
  /** Where the outbox's TypeORM connections go (possibly through a proxy). */
  url: string;
  /** Where handlers record calls and effects: always the database itself. */
  recordUrl: string;
  outbox: OutboxModuleOptions;
  /** Handlers sleep up to this long (at random) before their effect, so kills land mid-batch. */
  handlerDelayMs?: number;
  /** A deliberate fault to prove the suite notices it (see breaks.ts). */
  breakMode?: string;
  /**
   * Serve `GET /health` (readiness: OutboxHealthIndicator) and `GET /health/live` (liveness:
   * OutboxLivenessIndicator) through Terminus on 127.0.0.1 at this port, as a pod does.
   */
  httpPort?: number;
  /** A relay to a broker and/or an inbox from it (the across-services scenarios). */
  bridge?: FaultBridgeConfig;
  /**
   * Bounds each statement on the process's TypeORM connections (pg's `query_timeout`) and
   * retires each connection once it is a second old, as an application that must survive a
   * failover behind a moved address configures its pool: a connection gone silent then fails its
   * statements and is dropped at its release, not handed out again forever.
   */
  queryTimeoutMs?: number;
}

/** Where a worker relays `fault.tx` events to, or receives them from. */
export type FaultBroker =
  | { kind: 'nats'; servers: string; stream: string; consumer: string }
  | { kind: 'rabbitmq'; url: string; exchange: string; queue: string };

export interface FaultBridgeConfig {
  broker: FaultBroker;
  /** Relay every `fault.tx` event to the broker (handler `fault-relay`). */
  relay?: boolean;
  /** Receive the broker's messages into this worker's outbox (inbox `fault-inbox`). */
  inbox?: boolean;
}

/**
 * Kinds of emitted events, as recorded in `fault_emitted.kind`. `tx` events go to the
 * transactional handler only (`fault.tx`); `ordered` ones to `fault-ledger` (ordered by key) and
 * `fault-audit`, and so do `ordered-poison` ones, for which `fault-ledger` always fails;
 * `limited` ones to `fault-limited` alone (at most 3 running at once across the workers).
 */
export type EventKind =
  'work' | 'poison' | 'slow' | 'tx' | 'ordered' | 'ordered-poison' | 'limited';

/** One transaction of keyed events: `count` events of `key` (`fault-key:<key>`), in order. */
export interface KeyedTransaction {
  key: string;
  count: number;
  kind: 'ordered' | 'ordered-poison';
}

export type Command =
  | { cmd: 'status' }
  | { cmd: 'health' }
  | { cmd: 'start-dispatcher' }
  | { cmd: 'emit'; count: number; batch: number; kind: EventKind; slowMs?: number }
  /** `slow`: a `share` of the batches are `slow` events whose handlers take `ms`. */
  | {
      cmd: 'stream-start';
      perSecond: number;
      batch: number;
      kind?: EventKind;
      slow?: { share: number; ms: number };
      /** Report the ids of the events whose commit was acknowledged (`StreamReport.ids`). */
      ids?: boolean;
    }
  | { cmd: 'stream-stop' }
  /** `producers` loops, each emitting its transactions one after another into random keys. */
  | {
      cmd: 'keyed-stream-start';
      producers: number;
      perSecond: number;
      keys: number;
      /** Share of transactions with two events of their key. */
      pairShare: number;
      /** Share of first tries `fault-ledger` fails. */
      flakyShare: number;
    }
  /** These transactions one after another, as loop `producer`. */
  | { cmd: 'emit-keyed'; producer: number; transactions: KeyedTransaction[] }
  /** `OutboxAdmin.discard` of these events (worker only). */
  | { cmd: 'discard'; ids: string[]; reason: string }
  /** `OutboxAdmin.blockedKeys()` (worker only). */
  | { cmd: 'blocked-keys' };

export interface Request {
  id: number;
  command: Command;
}

export type Reply =
  { id: number; ok: true; result: unknown } | { id: number; ok: false; error: string };

/** Unprompted messages from a child, keyed by `notice`. */
export type Notice =
  | { notice: 'ready'; bootMs: number }
  /** Sent as SIGTERM handling begins; `at` is that moment, in `Date.now()` ms. */
  | { notice: 'shutting-down'; at: number }
  | { notice: 'dispatcher-stopped'; afterSignalMs: number }
  | { notice: 'closed'; afterSignalMs: number };

export interface WorkerStatus {
  inFlight: number;
  /** Transactional handlers that have written their effect and not yet returned (before COMMIT). */
  txOpen: number;
  calls: number;
  state: string;
  listener: string;
  /** When the dispatcher last completed a drain (claim answered), in `Date.now()` ms. */
  lastDrainAt: number | null;
  /** Claimed events waiting in the local queue for a slot (unstarted: a stop gives them back). */
  queued: number;
}

export interface WorkerHealth {
  status: 'up' | 'down';
  message?: string;
  listener?: string;
  state?: string;
}

export interface EmitReport {
  committed: number;
  failed: number;
  ids: string[];
}

export interface StreamReport {
  committed: number;
  failedBatches: number;
  /** With `ids` asked for at `stream-start`: every event whose commit was acknowledged. */
  ids?: string[];
}
