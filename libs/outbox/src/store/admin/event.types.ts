import type { OutboxEvent } from '../../outbox-event.types';
import type { HandlerFailure } from '../outbox-event.entity';

/**
 * Where an event stands, by the database clock. Dead and discarded as `DeadLetter.state` says,
 * and in flight as `OutboxStatus.inFlight` counts it (a dead event stays dead while a replay
 * runs); `retrying` as `DeadLetter.state` too: a handler failed it and it will run again,
 * whether its retry time has come (counted as due by `OutboxStatus`) or not.
 *
 * - `pending`: not run yet, no failure recorded; also after its lease ended without a settle
 * - `retrying`: a handler failed it, and it will run again (at `nextAttemptAt`)
 * - `in-flight`: a relay holds its lease and runs its handlers now
 * - `delivered`: all its handlers delivered it
 * - `dead`: it used its attempts; an automatic or an operator's replay may run it again
 * - `discarded`: set aside by `OutboxAdmin.discard`, never replayed on its own
 */
export type OutboxEventState =
  'pending' | 'retrying' | 'in-flight' | 'delivered' | 'dead' | 'discarded';

/** One event whole, for `OutboxAdmin.show` and `OutboxAdmin.events`. */
export interface OutboxEventDetail extends OutboxEvent {
  state: OutboxEventState;
  attempts: number;
  /** Handler name → when it delivered. */
  deliveries: Record<string, string>;
  failures: Record<string, HandlerFailure>;
  lastError: string | null;
  leaseExpiresAt: Date | null;
  /**
   * When it is next claimable (for an event in flight: when its lease ends); null once
   * delivered or discarded, and for a dead event that waits for an operator's replay.
   */
  nextAttemptAt: Date | null;
  dispatchedAt: Date | null;
  deadAt: Date | null;
  discardedAt: Date | null;
  discardReason: string | null;
}

/**
 * Which events `OutboxAdmin.events` lists, whatever their state: every condition given must
 * hold, and at least one must be given. Indexed: `organizationId` with `types` (one index range
 * per type, read newest first, a page at a time), and `ids`; the other combinations read every
 * event they match (`organizationId` alone: the organization's events) or, without
 * `organizationId` and `ids`, the table, within the statement timeout.
 */
export interface OutboxEventsFilter {
  types?: readonly string[];
  organizationId?: string;
  aggregateType?: string;
  aggregateId?: string;
  /** Only these events (1 to 500 ids): one event by id, within the other conditions. */
  ids?: readonly string[];
}

export interface OutboxEventsPage {
  /** Items per page, 1 to 500. Default 50. */
  limit?: number;
  /** The `next` cursor of the previous page of `events`. */
  after?: string;
}

/** A page of `OutboxAdmin.events`, newest first by occurrence. */
export interface OutboxEventList {
  items: OutboxEventDetail[];
  /** Pass as `after` for the next page; null on the last page. */
  next: string | null;
}
