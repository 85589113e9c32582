import type { EventDispatcher } from './event-dispatcher';
import type { OutboxCompleter, Settle, SettleResult } from './outbox-completer';
import type { OutboxRecord } from './outbox-event.types';
import type { HandlerOutcome, OutboxEvent } from './outbox-handler.types';
import type { OutboxRetryOptions } from './outbox.options';
import { retryDelayMs } from './retry-backoff';
import { scrubError } from './scrub-error';

export interface ExecutorOptions {
  leaseMs: number;
  retry: Required<OutboxRetryOptions>;
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
  private late = 0;
  private readonly idleWaiters = new Set<() => void>();

  constructor(
    private readonly dispatcher: EventDispatcher,
    private readonly completer: OutboxCompleter,
    private readonly options: ExecutorOptions,
    /** Told each time a slot frees up. */
    private readonly onSlotFree: () => void = () => undefined,
  ) {}

  /** Events whose handlers are running, overdue ones included. */
  get active(): number {
    return this.busy;
  }

  /** Events with a handler past its budget that has not returned yet. */
  get overdue(): number {
    return this.late;
  }

  /**
   * Starts the event's handlers now. `claimedAt` is `Date.now()` from before the claim was sent,
   * so `claimedAt + leaseMs` never comes later than the lease's real end.
   */
  start(record: OutboxRecord, claimedAt: number, abandon?: AbortSignal): Promise<ExecutionResult> {
    this.busy++;
    const run = this.dispatcher.execute(toEvent(record), record.deliveries, {
      attempt: record.attempts,
      signal: abandon,
    });
    let ended = false;
    let counted = false;
    void run.ended.then(() => {
      ended = true;
      if (counted) this.late--;
      this.busy--;
      if (this.busy === 0) for (const wake of this.idleWaiters) wake();
      this.onSlotFree();
    });
    return run.outcomes.then((outcomes) => {
      if (!ended && outcomes.some((o) => !o.ok && o.timedOut)) {
        counted = true;
        this.late++;
      }
      // Handlers cut short by a shutdown did not fail: the event keeps its lease and is claimed
      // again after it, so the handlers that were running get a fair new try.
      if (
        abandon?.aborted &&
        outcomes.some((o) => !o.ok && !o.timedOut && o.error === abandon.reason)
      ) {
        return 'abandoned' as const;
      }
      const settle = this.toSettle(record, outcomes);
      return this.completer
        .complete(settle, claimedAt + this.options.leaseMs)
        .then((result) => ({ settle, result }));
    });
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

  private toSettle(record: OutboxRecord, outcomes: HandlerOutcome[]): Settle {
    const handlers = outcomes.filter((o) => o.ok).map((o) => o.handlerName);
    const failures = outcomes.filter((o): o is Extract<HandlerOutcome, { ok: false }> => !o.ok);
    const { id, attempts } = record;
    if (failures.length === 0) {
      return { kind: 'delivered', record, settle: { id, attempts, handlers } };
    }
    return {
      kind: 'failed',
      record,
      settle: {
        id,
        attempts,
        handlers,
        failedHandlers: failures.map((f) => f.handlerName),
        error: failures.map((f) => `${f.handlerName}: ${scrubError(f.error)}`).join('; '),
        retryDelayMs: retryDelayMs(attempts, this.options.retry),
      },
    };
  }
}

/** What a handler sees: the record without the lease bookkeeping. */
function toEvent(record: OutboxRecord): OutboxEvent {
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  const { attempts, leaseExpiresAt, deliveries, deadAt, lastError, ...event } = record;
  return event;
}
