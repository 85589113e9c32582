import type { HandlerFailure } from '../handlers/handler.policy';
import type { OutboxEvent } from '../outbox-event.types';
import { isUuid } from '../emit/outbox-event.validator';

/** Which dead letters an `OutboxAdmin` query looks at: every condition given must hold. */
export interface DeadLetterFilter {
  types?: readonly string[];
  /** A handler that has failed the event and not delivered it. */
  handler?: string;
  organizationId?: string;
  aggregateType?: string;
  aggregateId?: string;
  /** Dead (retrying: emitted) at or after this time. */
  deadAfter?: Date;
  /** Dead (retrying: emitted) before this time. */
  deadBefore?: Date;
  /** Text the last error contains, case-insensitive. */
  errorContains?: string;
  /** Also events still retrying after a failure. Default false: dead events only. */
  includeRetrying?: boolean;
  /**
   * The `fingerprint` of a dead-letter group: events a failed handler (the one of `handler` when
   * given) failed with that kind of error. With `type` and `handler`, exactly one group.
   */
  fingerprint?: string;
  /** Also events discarded by `OutboxAdmin.discard`. Default false. */
  includeDiscarded?: boolean;
}

export interface DeadLetterPage {
  /** Items per page, 1 to 500. Default 50. */
  limit?: number;
  /** The `next` cursor of the previous page. */
  after?: string;
}

export interface FailedHandler {
  name: string;
  /** Its failures on this event so far. */
  failures: number;
  /** Its next try, or null once it has used its attempts. */
  retryAt: Date | null;
}

/** One undelivered event that failed: what failed, what was delivered, and when. */
export interface DeadLetter {
  id: string;
  type: string;
  aggregateType: string;
  aggregateId: string;
  organizationId: string | null;
  state: 'dead' | 'retrying' | 'discarded';
  attempts: number;
  failedHandlers: FailedHandler[];
  deliveredHandlers: string[];
  /** Scrubbed when it was recorded: `<handler>: <message>; …`. */
  lastError: string | null;
  occurredAt: Date;
  deadAt: Date | null;
  /** The next try; null for a dead event that waits for a replay, and for a discarded one. */
  nextAttemptAt: Date | null;
  discardedAt: Date | null;
  discardReason: string | null;
}

export interface DeadLetterList {
  items: DeadLetter[];
  /** Pass as `after` for the next page; null on the last page. */
  next: string | null;
}

/** Dead letters of one type that one handler failed with one kind of error. */
export interface DeadLetterGroup {
  type: string;
  /**
   * The handler that failed; null for events that record no failed handler (dead under the
   * event-level rule of an older version).
   */
  handler: string | null;
  /**
   * Hash of the handler's message (its part of the last error) with UUIDs, hex ids and numbers
   * blanked out. A handler that used its attempts before the event's last failed attempt has no
   * message there: its events group under the hash of an empty message.
   */
  fingerprint: string;
  /** One of the group's messages, as recorded (scrubbed). */
  sampleError: string | null;
  count: number;
  firstSeenAt: Date;
  lastSeenAt: Date;
}

/** What a dispatcher reports of itself every `DISPATCHER_REPORT_MS`. */
export interface DispatcherReport {
  /** `<host>/<pid>/<random>`: one per dispatcher start. */
  id: string;
  host: string;
  pid: number;
  state: string;
  listener: string;
  types: readonly string[] | null;
  concurrency: number;
  inFlight: number;
  startedAt: Date;
  lastClaimAt: Date | null;
}

/** A dispatcher as `OutboxAdmin.dispatchers` lists it. */
export interface DispatcherInfo extends DispatcherReport {
  seenAt: Date;
  /** Reported within the last three report intervals; a process that died stops reporting. */
  reporting: boolean;
}

/** Events delivered in one minute, for a throughput sparkline. */
export interface MinuteCount {
  /** The minute's start. */
  at: Date;
  delivered: number;
}

/** Undelivered events of one type by state, for `OutboxAdmin.status`. */
export interface TypeBacklog {
  type: string;
  /** Claimable now (never claimed, retry time reached, or given back). */
  due: number;
  retrying: number;
  inFlight: number;
  /** Leases that ended without a settle; claimable again. */
  expiredLeases: number;
  dead: number;
  discarded: number;
  /** How long the type's oldest due event has waited; null when none is due. */
  oldestDueWaitMs: number | null;
  /** When the type's next event is due, in ms from now (0: now); null when nothing waits. */
  nextDueInMs: number | null;
}

/** The whole outbox at a glance: exact counts (a scan of undelivered rows), lag, and by type. */
export interface OutboxStatus {
  /** Live events claimable now (never claimed, retry time reached, or given back). */
  due: number;
  retrying: number;
  inFlight: number;
  /** Leases that ended without a settle: a relay died or stalled; claimable again. */
  expiredLeases: number;
  /** Dead, not discarded. */
  dead: number;
  discarded: number;
  /** How long the oldest due live event has waited, in ms; null when none is due. */
  lagMs: number | null;
  /** When the next event is due, in ms from now (0: now); null when nothing waits. */
  nextDueInMs: number | null;
  byType: TypeBacklog[];
}

/** One event whole, for `OutboxAdmin.show`. */
export interface OutboxEventDetail extends OutboxEvent {
  attempts: number;
  /** Handler name → when it delivered. */
  deliveries: Record<string, string>;
  failures: Record<string, HandlerFailure>;
  lastError: string | null;
  leaseExpiresAt: Date | null;
  /** Null for a dead event that waits for a replay. */
  nextAttemptAt: Date | null;
  dispatchedAt: Date | null;
  deadAt: Date | null;
  discardedAt: Date | null;
  discardReason: string | null;
}

export interface DeadLetterRow {
  id: string;
  type: string;
  aggregate_type: string;
  aggregate_id: string;
  organization_id: string | null;
  attempts: number;
  deliveries: Record<string, string>;
  failures: Record<string, HandlerFailure>;
  last_error: string | null;
  occurred_at: Date;
  dead_at: Date | null;
  next_attempt_at: Date | null;
  discarded_at: Date | null;
  discard_reason: string | null;
  dead_letter_key: string;
}

export function toDeadLetter(row: DeadLetterRow): DeadLetter {
  return {
    id: row.id,
    type: row.type,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    organizationId: row.organization_id,
    state: row.discarded_at ? 'discarded' : row.dead_at ? 'dead' : 'retrying',
    attempts: row.attempts,
    failedHandlers: Object.entries(row.failures)
      .filter(([name]) => !(name in row.deliveries))
      .map(([name, failure]) => ({
        name,
        failures: failure.count,
        retryAt: failure.retryAt === null ? null : new Date(failure.retryAt),
      })),
    deliveredHandlers: Object.keys(row.deliveries),
    lastError: row.last_error,
    occurredAt: row.occurred_at,
    deadAt: row.dead_at,
    nextAttemptAt: row.discarded_at ? null : row.next_attempt_at,
    discardedAt: row.discarded_at,
    discardReason: row.discard_reason,
  };
}

/**
 * Which events an `OutboxAdmin.replay` or `discard` changes: the given ids, or every event a
 * filter selects. A filter with no condition selects every dead letter, so it is refused unless
 * `all` says that is meant.
 */
export type DeadLetterSelector =
  { ids: readonly string[] } | { filter: DeadLetterFilter; all?: boolean };

export interface ReplayOptions {
  /**
   * Only these handlers run again (each that has not delivered the event); every handler not yet
   * delivered when absent.
   */
  handlers?: readonly string[];
  /** Select and report, change nothing. */
  dryRun?: boolean;
  /** Who asked, kept in the recorded `outbox.event.replayed` event (an operator, a job). */
  actor?: string;
}

export interface DiscardOptions {
  /** Why, kept on the event and in the recorded `outbox.event.discarded` event. */
  reason: string;
  dryRun?: boolean;
  actor?: string;
}

/** What a replay or discard changed (with `dryRun`: would change). */
export interface DeadLetterChange {
  dryRun: boolean;
  /** Events changed, in id order. */
  ids: string[];
  /**
   * With an ids selector, the ids given that were not changed: unknown, delivered, not dead (for
   * a replay), already discarded (for a discard), or under a lease while a relay runs them.
   */
  unchanged: string[];
}

/** One batch of a change, as the repository runs it. */
export interface DeadLetterChangeBatch {
  change: { kind: 'replay'; handlers?: readonly string[] } | { kind: 'discard'; reason: string };
  filter: DeadLetterFilter;
  ids: readonly string[] | null;
  /** Keyset: only ids after this one. */
  afterId: string;
  limit: number;
  dryRun: boolean;
  actor?: string;
}

/** The keyset cursor: the last row's sort time (microseconds, UTC) and id, opaque to callers. */
export function encodeCursor(row: DeadLetterRow): string {
  return Buffer.from(JSON.stringify([row.dead_letter_key, row.id])).toString('base64url');
}

/** The cursor's parts, or null when it is not one `encodeCursor` made. */
export function decodeCursor(cursor: string): { at: string; id: string } | null {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (
      Array.isArray(parsed) &&
      parsed.length === 2 &&
      typeof parsed[0] === 'string' &&
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/.test(parsed[0]) &&
      isUuid(parsed[1])
    ) {
      return { at: parsed[0], id: parsed[1] };
    }
  } catch {
    // Not base64url JSON: reported below like any other foreign cursor.
  }
  return null;
}
