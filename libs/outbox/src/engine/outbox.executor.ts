import { performance } from 'node:perf_hooks';
import type { EventDispatcher, HandlerWithPolicy } from '../handlers/event.dispatcher';
import { handlerRetryDelayMs } from '../handlers/handler.policy';
import type { OutboxCompleter } from './outbox.completer';
import type { Settle, SettleResult } from './settle-statements';
import type { OutboxRecord } from '../store/lease/lease.types';
import type { OutboxEvent } from '../outbox-event.types';
import type { HandlerOutcome } from '../handlers/outbox-handler.types';
import { scrubError } from '../common/scrub-error.util';
import { LEASE_SETTLE_HEADROOM_MS } from '../outbox.options';
import { ALL, heldAfter, KeyChains, leftUndone, type Blocked } from './key-chains';

/** What an event that follows no other one in its claim inherits: nothing undone. */
const NOTHING_BEFORE: Blocked = new Set<string>();

function orderedOf(handlers: readonly HandlerWithPolicy[]): string[] {
  return handlers.filter((h) => h.policy.ordered).map((h) => h.name);
}

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
 * never runs more than its slots, however a downstream hangs.
 */
export class OutboxExecutor {
  private busy = 0;
  /** Each overdue event's run, and since when (`performance.now()`) it has been overdue. */
  private readonly late = new Map<object, number>();
  private readonly chains = new KeyChains();
  private readonly idleWaiters = new Set<() => void>();

  constructor(
    private readonly dispatcher: EventDispatcher,
    private readonly completer: OutboxCompleter,
    /** Told each time a slot frees up. */
    private readonly onSlotFree: () => void = () => undefined,
  ) {}

  /** Events whose handlers are running, overdue ones included. */
  get active(): number {
    return this.busy;
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
   * The latest `Date.now()` at which the event may start under `lease`: its longest handler
   * budget and the settle headroom must still fit before the lease ends.
   */
  latestStart(record: OutboxRecord, lease: ClaimLease): number {
    let budget = 0;
    for (const handler of this.dispatcher.policies(record.type)) {
      budget = Math.max(budget, handler.budgetMs);
    }
    return lease.deadline - budget - LEASE_SETTLE_HEADROOM_MS;
  }

  /**
   * Starts the event's handlers now, under the claim's `lease`; an event chained after another
   * of its claim (`after`) first waits for that one to settle, holding its slot.
   */
  start(record: OutboxRecord, lease: ClaimLease, abandon?: AbortSignal): Promise<ExecutionResult> {
    const before = this.chains.before(record);
    if (!before) return this.run(record, lease, abandon, NOTHING_BEFORE);
    this.busy++;
    return before.then((blocked) => {
      this.busy--;
      const ordered = orderedOf(this.dispatcher.policies(record.type));
      const held = heldAfter(record, ordered, blocked);
      return this.run(held === record.held ? record : { ...record, held }, lease, abandon, blocked);
    });
  }

  /** Whether the event may start now: the one before it in its chain, if any, has settled. */
  ready(record: OutboxRecord): boolean {
    return this.chains.ready(record);
  }

  /** A claim's records, before any starts: the chains of their keys (see `KeyChains`). */
  expectChains(records: readonly OutboxRecord[]): void {
    this.chains.expect(records);
  }

  /** The event goes back unstarted: the one after it in its chain must not run what it holds. */
  givenBack(record: OutboxRecord): void {
    this.chains.giveBack(record);
  }

  private run(
    record: OutboxRecord,
    lease: ClaimLease,
    abandon: AbortSignal | undefined,
    before: Blocked,
  ): Promise<ExecutionResult> {
    this.busy++;
    const handlers = this.dispatcher.policies(record.type);
    const run = this.dispatcher.execute(toEvent(record), this.notToRun(record, handlers), {
      attempt: record.attempts,
      handlerAttempts: handlerAttempts(record),
      signal: abandon,
    });
    let ended = false;
    const token = {};
    void run.ended.then(() => {
      ended = true;
      this.late.delete(token);
      this.busy--;
      if (this.busy === 0) for (const wake of this.idleWaiters) wake();
      this.onSlotFree();
    });
    return run.outcomes.then((outcomes) => {
      if (!ended && outcomes.some((o) => !o.ok && o.timedOut))
        this.late.set(token, performance.now());
      // Handlers cut short by a shutdown did not fail: the event keeps its lease and is claimed
      // again after it, so the handlers that were running get a fair new try.
      if (
        abandon?.aborted &&
        outcomes.some((o) => !o.ok && !o.timedOut && o.error === abandon.reason)
      ) {
        this.chains.end(record, ALL);
        return 'abandoned' as const;
      }
      const settle = this.toSettle(record, outcomes, handlers, lease);
      const followed = this.chains.followed(record);
      return this.completer.complete(settle, lease.deadline, followed).then((result) => {
        if (followed) this.endLink(record, handlers, settle, result, before);
        return { settle, result };
      });
    });
  }

  /** What the event leaves undone for the one after it in its chain, which may now start. */
  private endLink(
    record: OutboxRecord,
    handlers: readonly HandlerWithPolicy[],
    settle: Settle,
    result: SettleResult,
    before: Blocked,
  ): void {
    const written = result === 'settled' || result === 'dead';
    const succeeded = new Set(settle.kind === 'release' ? [] : settle.settle.handlers);
    this.chains.end(
      record,
      written
        ? leftUndone(
            orderedOf(handlers),
            (name) => succeeded.has(name) || Object.hasOwn(record.deliveries, name),
            before,
          )
        : ALL,
    );
    this.onSlotFree();
  }

  /** Resolves once no event holds a slot. */
  whenIdle(): Promise<void> {
    if (this.busy === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        this.idleWaiters.delete(wake);
        resolve();
      };
      this.idleWaiters.add(wake);
    });
  }

  /**
   * Handlers this claim does not run: those already delivered and, unless the event is a dead
   * replay (which gives every handler left one more try), those whose own retry time has not
   * come or whose attempts are used up. A dead replay that `OutboxAdmin.replay` narrowed to some
   * handlers has marked them, alone, with a retry time: it runs those. Ordered handlers an
   * earlier event of the key holds (`held`) never run now. "Now" is the claim's own database
   * clock (`claimedAt`).
   */
  private notToRun(
    record: OutboxRecord,
    handlers: readonly HandlerWithPolicy[],
  ): Record<string, unknown> {
    if (record.deadAt) {
      const marked = new Set(
        Object.entries(record.failures)
          .filter(
            ([name, failure]) =>
              failure.retryAt !== null && !Object.hasOwn(record.deliveries, name),
          )
          .map(([name]) => name),
      );
      if (marked.size === 0 && record.held.length === 0) return record.deliveries;
      const skipped: Record<string, unknown> = { ...record.deliveries };
      if (marked.size > 0)
        for (const h of handlers) if (!marked.has(h.name)) skipped[h.name] = true;
      for (const name of record.held) skipped[name] = true;
      return skipped;
    }
    // Most events are on their first try: nothing delivered, nothing failed, nothing held.
    if (isEmpty(record.failures) && record.held.length === 0) return record.deliveries;
    const claimedAt = record.claimedAt.getTime();
    const waiting: Record<string, unknown> = { ...record.deliveries };
    // An ordered handler held by an earlier event of the key runs after it, not now.
    for (const name of record.held) waiting[name] = true;
    for (const [name, failure] of Object.entries(record.failures)) {
      if (failure.retryAt === null || Date.parse(failure.retryAt) > claimedAt) waiting[name] = true;
    }
    return waiting;
  }

  /**
   * The settle of an attempt, by the per-handler rule: each failed handler counts one more
   * failure and, below its `maxAttempts`, gets its next try from its own retry schedule. The
   * event is delivered once every handler is; dead once every handler left has used its
   * attempts (a dead replay that fails stays dead); otherwise due at the earliest next try of
   * the handlers still retrying, when only the handlers due then run.
   */
  private toSettle(
    record: OutboxRecord,
    outcomes: HandlerOutcome[],
    handlers: readonly HandlerWithPolicy[],
    lease: ClaimLease,
  ): Settle {
    const { id, attempts } = record;
    // The common end: a first try on which every handler succeeded.
    if (outcomes.length === handlers.length && outcomes.every((o) => o.ok)) {
      const handlerNames = outcomes.map((o) => o.handlerName);
      return { kind: 'delivered', record, settle: { id, attempts, handlers: handlerNames } };
    }
    const succeeded = outcomes.filter((o) => o.ok).map((o) => o.handlerName);
    const failed = outcomes.filter((o): o is Extract<HandlerOutcome, { ok: false }> => !o.ok);
    const delivered = new Set([...Object.keys(record.deliveries), ...succeeded]);
    const left = handlers.filter((h) => !delivered.has(h.name));
    if (left.length === 0) {
      return { kind: 'delivered', record, settle: { id, attempts, handlers: succeeded } };
    }
    if (failed.length === 0 && this.onlyHeldLeft(record, left)) {
      return { kind: 'held', record, settle: { id, attempts, handlers: succeeded } };
    }
    const policies = new Map(handlers.map((h) => [h.name, h.policy]));
    const failures = failed.map(({ handlerName }) => {
      const policy = policies.get(handlerName) ?? this.dispatcher.defaultPolicy;
      const count = (ownFailure(record, handlerName)?.count ?? 0) + 1;
      const usedUp = record.deadAt !== null || count >= policy.maxAttempts;
      return {
        handler: handlerName,
        count,
        delayMs: usedUp ? null : handlerRetryDelayMs(policy, count),
      };
    });
    const updated = new Map(failures.map((f) => [f.handler, f]));
    const pending = left
      .filter((h) => {
        const update = updated.get(h.name);
        if (update) return update.delayMs !== null;
        return ownFailure(record, h.name)?.retryAt !== null;
      })
      .map((h) => h.name);
    const dead = record.deadAt ? failed.length > 0 : pending.length === 0;
    return {
      kind: 'failed',
      record,
      settle: {
        id,
        attempts,
        handlers: succeeded,
        failedHandlers: dead ? left.map((h) => h.name) : failed.map((f) => f.handlerName),
        error:
          failed.length === 0
            ? null
            : failed.map((f) => `${f.handlerName}: ${scrubError(f.error)}`).join('; '),
        retryDelayMs: this.soonestRetryMs(record, failures, pending, lease),
        failures,
        pending,
        dead,
      },
    };
  }

  /**
   * Whether the handlers `left` that may still run are all held by an earlier event of the key,
   * so the event waits for it (parked) rather than coming back at once. A handler that used its
   * attempts on a live event runs no more, and holds nothing up.
   */
  private onlyHeldLeft(record: OutboxRecord, left: readonly HandlerWithPolicy[]): boolean {
    if (record.held.length === 0) return false;
    const runnable = record.deadAt
      ? left
      : left.filter((h) => ownFailure(record, h.name)?.retryAt !== null);
    return runnable.length > 0 && runnable.every((h) => record.held.includes(h.name));
  }

  /** When the event is next due, as a delay from now: for logs and for planning the next wake. */
  private soonestRetryMs(
    record: OutboxRecord,
    failures: readonly { handler: string; delayMs: number | null }[],
    pending: readonly string[],
    lease: ClaimLease,
  ): number {
    let soonest = Infinity;
    for (const f of failures) if (f.delayMs !== null) soonest = Math.min(soonest, f.delayMs);
    // A handler that did not run keeps its retry time (database clock, read at the claim).
    const serverClaimedAt = record.claimedAt.getTime();
    const elapsed = Date.now() - lease.sentAt;
    const updated = new Set(failures.map((f) => f.handler));
    for (const name of pending) {
      const retryAt = ownFailure(record, name)?.retryAt;
      if (retryAt && !updated.has(name)) {
        soonest = Math.min(soonest, Math.max(0, Date.parse(retryAt) - serverClaimedAt - elapsed));
      }
    }
    return soonest === Infinity ? 0 : soonest;
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

/** Each handler's attempt number: one past its failures, 1 (absent) for the others. */
function handlerAttempts(record: OutboxRecord): Record<string, number> | undefined {
  if (isEmpty(record.failures)) return undefined;
  const attempts: Record<string, number> = {};
  for (const [name, failure] of Object.entries(record.failures)) attempts[name] = failure.count + 1;
  return attempts;
}

/**
 * The handler's failure entry. `Object.hasOwn`, never a bare index or `in`: handler names are
 * kebab-case, and `constructor` is a valid one that every plain object inherits.
 */
function ownFailure(
  record: OutboxRecord,
  handler: string,
): OutboxRecord['failures'][string] | undefined {
  return Object.hasOwn(record.failures, handler) ? record.failures[handler] : undefined;
}

function isEmpty(object: object): boolean {
  for (const key in object) if (Object.hasOwn(object, key)) return false;
  return true;
}
