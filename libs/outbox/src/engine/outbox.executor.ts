import { performance } from 'node:perf_hooks';
import type { EventDispatcher } from '../handlers/event.dispatcher';
import type { HandlerRunner } from '../handlers/handler.runner';
import type { RegisteredHandler } from '../handlers/registered-handler';
import type { OutboxCompleter } from './outbox.completer';
import type { Settle, SettleResult } from './settle-statements';
import type { OutboxRecord } from '../store/lease/lease.types';
import type { OutboxEvent } from '../outbox-event.types';
import { LEASE_SETTLE_HEADROOM_MS } from '../outbox.options';
import { KeyOrdering, type InChain } from '../ordering/key-ordering';
import { isHeld } from '../handlers/handler-limits';
import { handlerAttempts, handlersToRun, planSettle, settledByHandler } from './settle-plan';

/** A claim's lease as the local clock sees it, read once at the claim. */
export interface ClaimLease {
  /** `Date.now()` just before the claim was sent. */
  sentAt: number;
  /** `sentAt` plus the lease: never later than the lease's real end. A settle after it is stale. */
  deadline: number;
}

/** What became of one claimed event: its settle, or `abandoned` at shutdown (lease kept). */
export type ExecutionResult = { settle: Settle; result: SettleResult } | 'abandoned';

/**
 * The middle step of the flow (claim → execute → complete): runs one claimed event's remaining
 * handlers at once and hands the outcome to the completer as soon as they have ended or spent
 * their budget. Each event holds one slot until its handlers have really returned: a handler
 * past its budget that ignores its AbortSignal is `overdue` and keeps its slot, so the engine
 * never runs more than its slots, however a downstream hangs. A handler whose remaining work is
 * a wait it bounds itself (a relay waiting for confirms) may give the slot back earlier.
 */
export class OutboxExecutor {
  private busy = 0;
  /** Events whose handlers gave their slot back (see `releaseSlot`) and still run. */
  private waiting = 0;
  /** Each overdue event's run, and since when (`performance.now()`) it has been overdue. */
  private readonly late = new Map<object, number>();
  /** Per-key ordering within a claim: the one seam the executor has with it. */
  private readonly keys = new KeyOrdering();
  private readonly idleWaiters = new Set<() => void>();

  constructor(
    /** The handler registry: each event's handlers, looked up once when it starts. */
    private readonly registry: EventDispatcher,
    private readonly runner: HandlerRunner,
    private readonly completer: OutboxCompleter,
    /**
     * Told each time a slot frees up; with how long its event held it (ms) when an event's
     * handlers gave it back.
     */
    private readonly onSlotFree: (heldMs?: number) => void = () => undefined,
  ) {}

  /** Events holding a slot: their handlers are running, overdue ones included. */
  get active(): number {
    return this.busy;
  }

  /** Events whose handlers run, holding a slot or not (a relay waiting for confirms). */
  get inFlight(): number {
    return this.busy + this.waiting;
  }

  /** Events with a handler past its budget that has not returned yet. */
  get overdue(): number {
    return this.late.size;
  }

  /**
   * When the most recent of the events overdue now went past its budget (`performance.now()`), or null:
   * once every slot is overdue, the time since which none has been free.
   */
  get lastOverdueAt(): number | null {
    let latest: number | null = null;
    for (const at of this.late.values()) latest = Math.max(latest ?? at, at);
    return latest;
  }

  /**
   * The event's handlers, looked up once when its claim comes back and carried to its start; a
   * type nobody handles is said once (its events are settled as delivered).
   */
  handlersFor(record: OutboxRecord): readonly RegisteredHandler[] {
    const handlers = this.registry.handlersOf(record.type);
    if (handlers.length === 0) this.runner.reportUnhandled(record.type);
    return handlers;
  }

  /**
   * The latest `Date.now()` at which an event with these handlers may start under `lease`: its
   * longest handler budget and the settle headroom must still fit before the lease ends.
   */
  latestStart(handlers: readonly RegisteredHandler[], lease: ClaimLease): number {
    let budget = 0;
    for (const handler of handlers) budget = Math.max(budget, handler.budgetMs);
    return lease.deadline - budget - LEASE_SETTLE_HEADROOM_MS;
  }

  /**
   * Starts the event's `handlers` (see `handlersFor`) now, under the claim's `lease`; an event
   * chained after another of its claim first waits for that one to settle, holding its slot.
   */
  start(
    record: OutboxRecord,
    handlers: readonly RegisteredHandler[],
    lease: ClaimLease,
    abandon?: AbortSignal,
  ): Promise<ExecutionResult> {
    const chained = this.keys.before(record, handlers);
    if (!chained) return this.run(record, handlers, lease, abandon);
    this.busy++;
    return chained.then(({ record: held, before }) => {
      this.busy--;
      return this.run(held, handlers, lease, abandon, before);
    });
  }

  /** Whether the event may start now: the one before it in its chain, if any, has settled. */
  ready(record: OutboxRecord): boolean {
    return this.keys.ready(record);
  }

  /** A claim's records, before any starts: the chains of their keys (see `KeyOrdering`). */
  expectChains(records: readonly OutboxRecord[]): void {
    this.keys.expect(records);
  }

  /** The event goes back unstarted: the one after it in its chain must not run what it holds. */
  givenBack(record: OutboxRecord): void {
    this.keys.givenBack(record);
  }

  /** `before`: what the events before it in its claim left undone, when any came before it. */
  private run(
    record: OutboxRecord,
    handlers: readonly RegisteredHandler[],
    lease: ClaimLease,
    abandon: AbortSignal | undefined,
    before?: InChain['before'],
  ): Promise<ExecutionResult> {
    this.busy++;
    const toRun = handlersToRun(record, handlers);
    const settlesEvent = settledByHandler(record, handlers, toRun);
    const run = this.runner.start(toEvent(record), toRun, {
      attempt: record.attempts,
      handlerAttempts: handlerAttempts(record),
      signal: abandon,
      settlesEvent,
      latestStart: this.latestStart(toRun, lease),
    });
    let released = false;
    const token = {};
    const startedAt = performance.now();
    void run.released
      .then(() => {
        released = true;
        this.late.delete(token);
        this.busy--;
        this.waiting++;
        this.onSlotFree(performance.now() - startedAt);
        return run.ended;
      })
      .then(() => {
        this.waiting--;
        if (this.busy + this.waiting === 0) for (const wake of this.idleWaiters) wake();
      });
    return run.outcomes.then((outcomes) => {
      if (!released && outcomes.some((o) => !o.ok && !isHeld(o) && o.timedOut))
        this.late.set(token, performance.now());
      const settle = planSettle(record, handlers, outcomes, Date.now() - lease.sentAt);
      // Handlers cut short by a shutdown did not fail: the event keeps its lease and is claimed
      // again after it, so the handlers that were running get a fair new try.
      if (
        abandon?.aborted &&
        outcomes.some((o) => !o.ok && !isHeld(o) && !o.timedOut && o.error === abandon.reason)
      ) {
        this.keys.abandoned(record);
        return 'abandoned' as const;
      }
      // Its transaction committed the event delivered with its record: nothing left to write.
      if (settlesEvent && outcomes[0].ok) return { settle, result: 'settled' as const };
      const followed = this.keys.followed(record);
      return this.completer.complete(settle, lease.deadline, followed).then((result) => {
        if (followed) {
          const written = result === 'settled' || result === 'dead';
          const succeeded = settle.kind === 'release' ? [] : settle.settle.handlers;
          this.keys.settled({ record, before }, handlers, written, succeeded);
          // The event after it in its chain may start now.
          this.onSlotFree();
        }
        return { settle, result };
      });
    });
  }

  /** Resolves once no event holds a slot and no handler that gave its slot back still runs. */
  whenIdle(): Promise<void> {
    if (this.busy + this.waiting === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        this.idleWaiters.delete(wake);
        resolve();
      };
      this.idleWaiters.add(wake);
    });
  }
}

/**
 * What a handler sees: the record without the lease bookkeeping. Field by field rather than a
 * rest pattern, which builds the object through V8's slow path.
 */
function toEvent(record: OutboxRecord): OutboxEvent {
  return {
    id: record.id,
    type: record.type,
    aggregateType: record.aggregateType,
    aggregateId: record.aggregateId,
    organizationId: record.organizationId,
    requestId: record.requestId,
    payload: record.payload,
    metadata: record.metadata,
    occurredAt: record.occurredAt,
    causationId: record.causationId,
    correlationId: record.correlationId,
    orderingKey: record.orderingKey,
  };
}
