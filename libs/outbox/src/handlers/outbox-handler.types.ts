import type { EntityManager } from 'typeorm';
import type { NewOutboxEvent, OutboxEvent } from '../outbox-event.types';
import type { HandlerRetry } from '../outbox.options';
import type { ISOLATION_LEVELS } from '../outbox.constants';

export interface HandlerContext {
  /** The persisted name this handler was registered under. */
  handlerName: string;
  /** The attempt of the event (1 on first delivery): every claim of it counts, whatever ran. */
  attempt: number;
  /** This handler's own try of this event: 1, then one more after each of its failures. */
  handlerAttempt: number;
  /** Aborts when the handler's time budget is spent or the engine abandons it at shutdown. */
  signal: AbortSignal;
  /**
   * `<handlerName>:<eventId>`: the same on every redelivery of this event to this handler, so
   * side effects keyed by it (mail, payments, webhooks) happen once.
   */
  idempotencyKey: string;
}

/** What `ctx.emit` takes: the events of `OutboxPublisher.emit`. */
export type FollowUpEmit = {
  <P>(event: NewOutboxEvent<P>): Promise<string>;
  <P>(events: readonly NewOutboxEvent<P>[]): Promise<string[]>;
};

/** The context of a handler declared with `transaction: true`. */
export interface TransactionalHandlerContext extends HandlerContext {
  /**
   * The EntityManager of the handler's transaction on the outbox's DataSource. Everything
   * written through it commits together with this handler's delivery record, or not at all.
   */
  manager: EntityManager;
  /**
   * Writes follow-up events in the handler's transaction, so they exist only if the handler's
   * work commits. Each carries `causationId` (this event's id) and, unless the event sets its
   * own, this event's `correlationId` (or this event's id when it has none), `requestId` and
   * `organizationId`.
   */
  emit: FollowUpEmit;
}

/** Isolation levels a transactional handler may ask for; READ COMMITTED by default. */
export type OutboxIsolationLevel = (typeof ISOLATION_LEVELS)[number];

export type OutboxHandlerFn<P = unknown> = (
  event: OutboxEvent<P>,
  context: HandlerContext,
) => unknown;

export interface OnOutboxEventOptions {
  /** Event types this handler receives, or `'*'` for every type (dead announcements included). */
  events: readonly string[] | '*';
  /**
   * This handler's own time budget in milliseconds (an integer from 1), instead of the module's
   * `handlerTimeoutMs`. The lease must cover the largest budget plus 1 s; the boot fails
   * otherwise.
   */
  timeoutMs?: number;
  /**
   * Run the handler in a transaction on the outbox's DataSource (`ctx.manager`, `ctx.emit`, and
   * the ambient transaction of `@nestjs-cls/transactional` when the app uses it) and record its
   * delivery in that same transaction, guarded by the claimed attempt: its database writes then
   * happen exactly once. READ COMMITTED unless `{ isolationLevel }` says otherwise.
   */
  transaction?: boolean | { isolationLevel?: OutboxIsolationLevel };
  /**
   * This handler's own retry schedule, instead of the module's `retry`: `{ baseMs, maxMs,
   * jitter }` (fields not given come from the module's), or a list of delays in ms, one per
   * failure (for example the Standard Webhooks schedule `[5_000, 300_000, 1_800_000, …]`).
   */
  retry?: HandlerRetry;
  /**
   * Runs of this handler that may fail before the event is dead for it; the module's
   * `maxAttempts` when absent, or one more than the delays of a `retry` list.
   */
  maxAttempts?: number;
  /**
   * Runs this handler on the events of one ordering key (`event.orderingKey`) one at a time, in
   * the order their transactions committed. `onDead` says what a dead event does to its key for
   * this handler: `'block'` (the default) holds the key until the event is replayed and delivered
   * or discarded; `'skip'` lets the next event run.
   */
  ordered?: boolean | { onDead?: OutboxOrderedOnDead };
  /**
   * Runs of this handler in flight at once, across every process on the database (an integer
   * from 1). A run that would go past it does not start: its event is held by the limit (neither
   * a failure nor an attempt) and comes back when a place is likely free.
   */
  maxConcurrent?: number;
  /**
   * Runs of this handler started in any window of `perMs`, across every process on the
   * database: `{ limit: 10, perMs: 1000 }` for a provider that takes 10 requests a second. A run
   * past it is held by the limit until the window has room.
   */
  rate?: OutboxHandlerRate;
  /**
   * `maxConcurrent` and `rate` count per partition (the event's `partitionKey`, else its
   * organization, else ''), not across them all: at most N in flight per organization.
   */
  limitPerPartition?: boolean;
}

/** Starts allowed in any window of `perMs` (see `OnOutboxEventOptions.rate`). */
export interface OutboxHandlerRate {
  /** Runs started per window: an integer from 1. */
  limit: number;
  /** The window in milliseconds: an integer from 1. */
  perMs: number;
}

/** What a dead event does to its key for an ordered handler (see `OnOutboxEventOptions.ordered`). */
export type OutboxOrderedOnDead = 'block' | 'skip';

/** What `EventDispatcher.deliver` reports for one handler. */
export type HandlerOutcome =
  | { handlerName: string; ok: true }
  | { handlerName: string; ok: false; error: unknown; timedOut: boolean };
