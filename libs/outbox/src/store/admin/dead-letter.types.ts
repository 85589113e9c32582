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
   * given) failed with that kind of error. With `types: [type]` and `handler`, exactly one group.
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

/** What `OutboxAdmin.blockedKeys` lists: each condition narrows, and the page. */
export interface BlockedKeysFilter {
  /** Keys blocked for this ordered handler only. */
  handler?: string;
  /** This key only (an `orderingKey`, or `aggregateType:aggregateId`). */
  key?: string;
  /** Items per page, 1 to 500. Default 50. */
  limit?: number;
  /** The `next` cursor of the previous page. */
  after?: string;
}

/** A key an ordered handler cannot go on with: the key's head is dead for it. */
export interface BlockedKey {
  /** The ordered handler (with `onDead: 'block'`) that the key is blocked for. */
  handler: string;
  key: string;
  /** The dead head: replay it (delivered, it unblocks) or discard it (unblocks at once). */
  eventId: string;
  /** When the head became dead. */
  since: Date;
  /** The handler's part of the head's last error (scrubbed, as stored), if it recorded one. */
  lastError: string | null;
  /** Events of the key queued behind the head for the handler, counted up to 1,000. */
  waiting: number;
}

export interface BlockedKeyList {
  items: BlockedKey[];
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

/**
 * Which events an `OutboxAdmin.replay` or `discard` changes: the given ids, or every event a
 * filter selects. A filter with no condition selects every dead letter, so it is refused unless
 * `all` says that is meant.
 */
export type DeadLetterSelector =
  { ids: readonly string[] } | { filter: DeadLetterFilter; all?: boolean };

/**
 * The bounds of a replay or discard by filter (refused with an ids selector, which is bounded
 * by its ids): it stops at `maxRows` events or once `timeBudgetMs` has passed, whichever comes
 * first, and answers a `cursor` to go on from.
 */
export interface ChangeBounds {
  /** The most events one call changes (or, in a dry run, counts): 1 to 100,000. Default 10,000. */
  maxRows?: number;
  /**
   * No batch starts after this many milliseconds (the one running then finishes, within the
   * statement timeout): 1 to 300,000. Default 10,000. The first batch always runs.
   */
  timeBudgetMs?: number;
  /** The `cursor` of the previous call with the same selector: go on after it. */
  after?: string;
}

export interface ReplayOptions extends ChangeBounds {
  /**
   * Only these handlers run again (each that has not delivered the event); every handler not yet
   * delivered when absent. The command's `--rerun`.
   */
  rerun?: readonly string[];
  /** @deprecated The former name of `rerun`; give one of the two. */
  handlers?: readonly string[];
  /** Select and report, change nothing. */
  dryRun?: boolean;
  /** Who asked, kept in the recorded `outbox.event.replayed` event (an operator, a job). */
  actor?: string;
}

export interface DiscardOptions extends ChangeBounds {
  /** Why, kept on the event and in the recorded `outbox.event.discarded` event. */
  reason: string;
  dryRun?: boolean;
  actor?: string;
}

/** What a replay or discard changed (with `dryRun`: would change). */
export interface DeadLetterChange {
  dryRun: boolean;
  /** How many events changed. */
  count: number;
  /** How many of each type changed. */
  countsByType: Record<string, number>;
  /** The first 100 events changed, in id order. */
  sampleIds: string[];
  /**
   * With an ids selector, every event changed, in id order. With a filter, the same as
   * `sampleIds` (at most 100): read `count` for how many.
   */
  ids: string[];
  /**
   * With an ids selector, the ids given that were not changed: unknown, delivered, not dead (for
   * a replay), already discarded (for a discard), or under a lease while a relay runs them.
   */
  unchanged: string[];
  /**
   * With a filter that stopped before the end of its selection: pass it as `after` to the same
   * call to go on with the events after the last it looked at (a stop at `maxRows` may find none
   * left). Null once the selection is done, and with an ids selector.
   */
  cursor: string | null;
  /** Why a change by filter stopped before the end of its selection; null when it did not. */
  stoppedBy: 'maxRows' | 'timeBudget' | null;
}
