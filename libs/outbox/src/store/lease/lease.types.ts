import type { OutboxHorizon } from '../horizon.sql';

export type { OutboxHorizon };
import type { OutboxEvent } from '../../outbox-event.types';
import type { HandlerFailure } from '../outbox-event.entity';

/** An outbox row as a claim returns it: the event, leased to the caller for `attempts`. */
export interface OutboxRecord<P = unknown> extends OutboxEvent<P> {
  /** The attempt this claim holds; settles must present it. */
  attempts: number;
  /** When the claim ran, by the database clock: retry times are compared with it. */
  claimedAt: Date;
  /** When the row became claimable (its due time before this claim), by the database clock. */
  dueAt: Date;
  leaseExpiresAt: Date;
  /** Handlers already delivered, by name, with their delivery time (ISO text). */
  deliveries: Record<string, string>;
  /** Handlers that failed before, by name: how often, and when each may run again. */
  failures: Record<string, HandlerFailure>;
  /** Set when the event ran out of attempts; a claimed dead row is a replay. */
  deadAt: Date | null;
  lastError: string | null;
  /**
   * Ordered handlers of this event that must not run yet: an earlier event of its key is not
   * done for them. Empty for most events.
   */
  held: readonly string[];
  /**
   * Placed in its key for ordered handlers when emitted: its settles tell the key (the wait
   * counts, the next event), whichever handlers this instance orders.
   */
  sequenced: boolean;
  /**
   * The event of the same key just before this one in the same claim, or null: the chain of a
   * key's events taken by one claim, each run after the one before it has settled. `held` then
   * leaves out what that event and those before it in the claim hold.
   */
  after: string | null;
  /**
   * The partition fair claims share out by: the emitter's `partitionKey`, else the event's
   * organization, else '' (one partition for every event that has neither).
   */
  partition: string;
  /**
   * Set by a fair claim: whether the row came from the fill in due order rather than from its
   * partition's share. Undefined for a claim in due order.
   */
  fromFill?: boolean;
}

export interface ClaimOptions {
  /**
   * Most rows to claim. Due dead rows are reserved half of it, rounded down, and may take what
   * live rows leave, so replays neither starve live work nor are starved by it.
   */
  limit: number;
  /**
   * Whether due dead rows (replays) are claimed too; true when absent. A claim of live rows
   * alone costs the server about half as much: the engine sends one while it knows no dead row
   * to be due (see `OutboxProducer`).
   */
  includeDead?: boolean;
  /** How long the claim holds each row before another relay may take it. */
  leaseMs: number;
  /** Only these event types (a dedicated worker pool); all types when absent. */
  types?: readonly string[];
  /**
   * Live rows due before this time (epoch ms, database clock) are not looked at; null or absent:
   * the whole due range. For a caller that knows nothing is due before it (see `DueRange`).
   */
  dueFrom?: number | null;
  /** Ordered handlers whose dead events do not hold their key (`ordered: { onDead: 'skip' }`). */
  skipDead?: readonly string[];
  /**
   * Share a live claim out across partitions (see `OutboxRecord.partition`) once the database
   * has the fair claim; due order when false or absent.
   */
  fair?: boolean;
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
  failures: readonly { handler: string; count: number; delayMs: number | null }[];
  /** Handlers still retrying: the event is due at the earliest of their retry times. */
  pending: readonly string[];
  /** Every handler left has used its attempts: the event becomes dead (announced once). */
  dead: boolean;
  /**
   * Set when a handler of the event was held by its limit: when the limit has room (database
   * clock). The event is due then if no retry comes sooner.
   */
  limitRoomAt?: Date;
}

/**
 * An attempt whose limited handlers were held back by their limit: the handlers that ran and
 * succeeded are recorded, and the event is due again at `dueAt` with its attempt given back.
 */
export interface LimitedSettle extends DeliveredSettle {
  /** When the event is due again, by the database clock. */
  dueAt: Date;
  /** The same, as a delay from now: for planning the next wake. */
  retryDelayMs: number;
  /** The claim's lease end: with `attempts`, what tells this claim from a later one. */
  leaseExpiresAt: Date;
}

/** What settles of an app with ordered handlers also do (see `orderedDone`). */
export interface OrderedSettleOptions {
  /** The ordered handlers whose dead events do not hold their key. */
  skipDead: readonly string[];
}

export interface MarkFailedOptions {
  /**
   * How long a row that is or becomes dead rests before its next replay; Infinity: no automatic
   * replay, the row waits for `OutboxAdmin.replay`.
   */
  deadRetryMs: number;
  /** `deadRetryMs` for these event types. */
  deadRetryByType?: Readonly<Record<string, number>>;
  /** Set when the app has ordered handlers: the settle also frees their keys. */
  ordering?: OrderedSettleOptions;
}

/** What one settle statement wrote. */
export interface SettleOutcome {
  /** Rows written. */
  settled: string[];
  /** Rows left untouched: their lease was lost and another claim holds a newer attempt. */
  stale: string[];
  /**
   * `markFailed` only: rows that became dead in this settle; each was announced once with
   * `outbox.event.dead`.
   */
  newlyDead?: string[];
  /**
   * `markFailed` only: the earliest time (epoch ms, database clock) a row it left live is due
   * again, or null when it left none.
   */
  retryFrom?: number | null;
}

/**
 * Unsettled events counted by state: one meaning for each state wherever it is counted (the
 * engine's pending state, `OutboxAdmin.status` and its rows by type; see `STATE_COUNTS`).
 */
export interface StateCounts {
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
   * Live events waiting for an earlier event of their key to be done with by their ordered
   * handlers: not due until then, and not counted in `retrying`.
   */
  parked: number;
  /**
   * Events that ran out of attempts and are not discarded; replayed every `deadRetryMs` (unless
   * it is 0) and by `OutboxAdmin.replay`.
   */
  dead: number;
}

/** Counts by state and timings of the unsettled rows; see `OutboxLeaseStore.pendingState`. */
export interface PendingState extends StateCounts {
  /** Milliseconds until the next row is due (0 when one is due now); null when nothing waits. */
  nextDueInMs: number | null;
  /**
   * How long the oldest claimable live event has waited since it became due, in milliseconds;
   * null when none is due. Events resting in backoff are not lag.
   */
  oldestDueWaitMs: number | null;
  /**
   * Keys an ordered handler cannot go on with because their head is dead for it
   * (`onDead: 'block'`); `OutboxAdmin.blockedKeys` lists them.
   */
  blockedKeys: number;
  /**
   * How long the oldest event that holds its key for an ordered handler while that handler
   * retries it has waited since it was emitted, in ms; null when no such event. The events of
   * its key wait behind it for that handler as long as it retries.
   */
  orderedWaitMs: number | null;
  /**
   * The cap each count was read with: a count equal to it means "at least this many". Null when
   * the counts are exact (`exactState`).
   */
  countLimit: number | null;
  /** The xmin horizon on the outbox's database (see `OutboxHorizon`). */
  horizon: OutboxHorizon;
}

/** Options of `nextDue` and `exactState`. */
export interface TypeFilterOptions {
  /** Only these event types; all types when absent. */
  types?: readonly string[];
}

export interface NextDueOptions extends TypeFilterOptions {
  /** Live rows due before this time (epoch ms) are not looked at, as in `ClaimOptions`. */
  dueFrom?: number | null;
}

export interface PendingStateOptions {
  /** Only these event types; all types when absent. */
  types?: readonly string[];
  /**
   * Most index entries each count reads, so the query costs the same at any backlog; counts
   * stop at this value. Default 1000.
   */
  countLimit?: number;
  /**
   * The running engine's claim bound (epoch ms, see `ClaimOptions.dueFrom`): due rows and
   * expired leases are read from there. Null or absent: from the start.
   */
  dueFrom?: number | null;
}
