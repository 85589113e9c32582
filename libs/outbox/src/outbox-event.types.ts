import type { HandlerFailure } from './handlers/handler.policy';

/** The event as a handler sees it: what was emitted, without the outbox's bookkeeping. */
export interface OutboxEvent<P = unknown> {
  id: string;
  type: string;
  aggregateType: string;
  aggregateId: string;
  organizationId: string | null;
  requestId: string | null;
  payload: P;
  metadata: Record<string, unknown>;
  occurredAt: Date;
  /** The event whose handler emitted this one, or null. */
  causationId: string | null;
  /** The chain this event belongs to, or null (see `NewOutboxEvent.correlationId`). */
  correlationId: string | null;
}

/** An event to write to the outbox, inside the caller's transaction. */
export interface NewOutboxEvent<P = unknown> {
  /** A UUID for idempotent emission; a time-ordered UUIDv7 is generated when absent. */
  id?: string;
  /** The event type handlers subscribe to, for example `invoice.paid`. */
  type: string;
  aggregateType: string;
  aggregateId: string;
  organizationId?: string | null;
  requestId?: string | null;
  /** Any JSON value; refused before anything is written when it cannot round-trip. */
  payload: P;
  /** Trace context, headers and similar; a JSON object. */
  metadata?: Record<string, unknown>;
  /**
   * The id of the event this one follows from. `ctx.emit` in a transactional handler sets it to
   * the event being handled.
   */
  causationId?: string | null;
  /**
   * Names the chain of events this one belongs to (any text, for example an upstream request's
   * correlation id). `ctx.emit` carries the parent's over, or the parent's own id when the parent
   * has none, so every event of a chain shares the id of its first event.
   */
  correlationId?: string | null;
}

/** What an enqueue did with one event. */
export interface EnqueuedEvent {
  id: string;
  /** The id was already present with the same content; nothing was written for it. */
  duplicate: boolean;
}

/** An outbox row as a claim returns it: the event, leased to the caller for `attempts`. */
export interface OutboxRecord<P = unknown> extends OutboxEvent<P> {
  /** The attempt this claim holds; settles must present it. */
  attempts: number;
  leaseExpiresAt: Date;
  /** Handlers already delivered, by name, with their delivery time (ISO text). */
  deliveries: Record<string, string>;
  /** Handlers that failed before, by name: how often, and when each may run again. */
  failures: Record<string, HandlerFailure>;
  /** Set when the event ran out of attempts; a claimed dead row is a replay. */
  deadAt: Date | null;
  lastError: string | null;
}

export interface ClaimOptions {
  /**
   * Most rows to claim. Due dead rows are reserved half of it, rounded down, and may take what
   * live rows leave, so replays neither starve live work nor are starved by it.
   */
  limit: number;
  /** How long the claim holds each row before another relay may take it. */
  leaseMs: number;
  /**
   * @deprecated Unused: a dead row's replay time is stored when it fails (see
   * `MarkFailedOptions.deadRetryMs`), and the claim takes it from there.
   */
  deadRetryMs?: number;
  /** Only these event types (a dedicated worker pool); all types when absent. */
  types?: readonly string[];
}

/** The result of one handler run, reported back at settle time. */
export interface DeliveredSettle {
  id: string;
  /** The attempt count the claim returned; a settle with another count writes nothing. */
  attempts: number;
  /** Handlers that succeeded in this attempt; merged into `deliveries` server side. */
  handlers: readonly string[];
}

export interface FailedSettle extends DeliveredSettle {
  /** Handlers that failed in this attempt (all handlers left, once dead), named in the dead announcement. */
  failedHandlers: readonly string[];
  /** What was thrown; stored scrubbed and bounded as `last_error`. Null keeps the last one. */
  error: unknown;
  /** Delay before the next attempt when no handler of `pending` has a retry time. */
  retryDelayMs: number;
  /** Each failed handler's new failure count, and its delay before it may run again (null: used up). */
  failures?: readonly { handler: string; count: number; delayMs: number | null }[];
  /** Handlers still retrying: the event is due at the earliest of their retry times. */
  pending?: readonly string[];
  /** Every handler left has used its attempts. Absent: dead at `maxAttempts` event attempts. */
  dead?: boolean;
}

export interface MarkFailedOptions {
  /** Attempts after which a live row becomes dead. */
  maxAttempts: number;
  /**
   * How long a row that is or becomes dead rests before its next replay; Infinity: no automatic
   * replay, the row waits for `OutboxAdmin.replay`.
   */
  deadRetryMs: number;
  /** `deadRetryMs` for these event types. */
  deadRetryByType?: Readonly<Record<string, number>>;
}

export interface SettleOutcome {
  /** Rows written. */
  settled: string[];
  /** Rows left untouched: their lease was lost and another claim holds a newer attempt. */
  stale: string[];
}

export interface FailOutcome extends SettleOutcome {
  /** Rows that became dead in this settle; each was announced once with `outbox.event.dead`. */
  newlyDead: string[];
}

/** Counts by state and timings of the unsettled rows; see `OutboxRepository.pendingState`. */
export interface PendingState {
  /** Milliseconds until the next row is due (0 when one is due now); null when nothing waits. */
  nextDueInMs: number | null;
  /**
   * How long the oldest claimable live event has waited since it became due, in milliseconds;
   * null when none is due. Events resting in backoff are not lag.
   */
  oldestDueWaitMs: number | null;
  /** Live events ready to be claimed now (never claimed, or retry time reached, or given back). */
  due: number;
  /** Live events resting until their next attempt (after a failure). */
  retrying: number;
  /** Live events under a lease: a relay is running their handlers. */
  inFlight: number;
  /**
   * Live events whose lease ended without a settle (a relay crashed or stalled); claimable
   * again, and not counted in `due`.
   */
  expiredLeases: number;
  /**
   * Events that ran out of attempts and are not discarded; replayed every `deadRetryMs` (unless
   * it is 0) and by `OutboxAdmin.replay`.
   */
  dead: number;
  /**
   * The cap each count was read with: a count equal to it means "at least this many". Null when
   * the counts are exact (`exactState`).
   */
  countLimit: number | null;
}

/** Options of `nextDue` and `exactState`. */
export interface TypeFilterOptions {
  /** Only these event types; all types when absent. */
  types?: readonly string[];
}

export interface PendingStateOptions {
  /** @deprecated Unused: each dead row stores its own replay time. */
  deadRetryMs?: number;
  /** Only these event types; all types when absent. */
  types?: readonly string[];
  /**
   * Most index entries each count reads, so the query costs the same at any backlog; counts
   * stop at this value. Default 1000.
   */
  countLimit?: number;
}

export interface SweepOptions {
  /** Delivered rows older than this are deleted. */
  retentionMs: number;
  /** Rows per delete statement; small batches keep locks and WAL bursts short. */
  batchSize: number;
  /** Stop after this many batches in one sweep (unbounded when absent). */
  maxBatches?: number;
  /** Stop between batches once aborted (shutdown). */
  signal?: AbortSignal;
}

/** Payload of the `outbox.event.dead` announcement. */
export interface OutboxEventDeadPayload {
  eventId: string;
  type: string;
  aggregateType: string;
  aggregateId: string;
  attempts: number;
  failedHandlers: string[];
  lastError: string | null;
}

/** Which events a testing helper looks at: every condition given must hold. */
export interface OutboxEventFilter {
  ids?: readonly string[];
  type?: string;
  aggregateType?: string;
  aggregateId?: string;
  correlationId?: string;
}

/** An event as it was emitted, and where its delivery stands (the testing kit's view). */
export interface EmittedOutboxEvent<P = unknown> extends OutboxEvent<P> {
  /** Claims so far. */
  attempts: number;
  /** Handlers that have delivered it. */
  deliveredTo: string[];
  dispatchedAt: Date | null;
  deadAt: Date | null;
}
