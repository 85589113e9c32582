import { Injectable, Logger, Optional } from '@nestjs/common';
import { HandlerTransactions } from './handler.transactions';
import { OutboxTelemetry } from '../telemetry/outbox.telemetry';
import { OutboxMessages } from '../outbox.messages';
import { InvalidOutboxHandlerTransactionError } from '../outbox.errors';
import type { OutboxEvent } from '../outbox-event.types';
import { HandlerLimits, type RunOutcome } from './handler-limits';
import { RELEASE_SLOT, type SlotReleasingContext } from './slot-release';
import type { RegisteredHandler } from './registered-handler';
import { LazyAbort } from './lazy-abort';
import { raceHandler } from './handler-race';

/** The handlers of one event, started: see `HandlerRunner.start`. */
export interface HandlerRun {
  /**
   * One outcome per handler, each at its end or when its budget is spent, or held back by its
   * limit without starting.
   */
  outcomes: Promise<RunOutcome[]>;
  /** Every handler has really returned (or thrown), budget or not. */
  ended: Promise<void>;
  /**
   * Every handler has returned or given its slot back (see `releaseSlot`): the event's slot is
   * free. Never later than `ended`.
   */
  released: Promise<void>;
}

export interface DeliverOptions {
  /** The event's attempt number, passed to handlers. */
  attempt: number;
  /** Aborts every handler of this delivery (the engine abandoning them at shutdown). */
  signal?: AbortSignal;
  /** Each handler's own try of this event (1 when absent), passed as `ctx.handlerAttempt`. */
  handlerAttempts?: Readonly<Record<string, number>>;
  /**
   * The one handler started is transactional and the last one the event waits for: its
   * transaction marks the event delivered as it records the handler (see `settledByHandler`).
   */
  settlesEvent?: boolean;
  /**
   * The latest `Date.now()` at which a handler may start under the claim's lease: a limited
   * handler admitted later gives its place back and waits instead.
   */
  latestStart?: number;
}

const SETTLED = Promise.resolve();

interface OneRun {
  outcome: Promise<RunOutcome>;
  ended: Promise<void>;
  released: Promise<void>;
}

/**
 * Runs handlers the registry (`EventDispatcher`) found: each with its own time budget and
 * AbortSignal, a transactional one inside its transaction. A handler that throws (synchronously
 * or not) or runs over its budget is reported as a failure and never stops the others.
 */
@Injectable()
export class HandlerRunner {
  private readonly logger = new Logger('Outbox');
  /** Types already reported as having no handler, so each is logged once. */
  private readonly unhandledTypes = new Set<string>();

  constructor(
    @Optional() private readonly transactions?: HandlerTransactions,
    @Optional() private readonly telemetry: OutboxTelemetry = new OutboxTelemetry(),
    /** Admits runs of handlers with a limit; without it (a runner built by hand) none is limited. */
    @Optional() private readonly limits?: HandlerLimits,
  ) {}

  /**
   * Starts `handlers` on the event and reports on them twice: `outcomes` as soon as each has
   * ended or spent its budget (what gets settled), `ended` once every one of them has really
   * returned. A handler past its budget that ignores its AbortSignal is still running between
   * the two; the engine keeps its slot busy until `ended`, so a hung downstream cannot pile up
   * more concurrent work than the slots allow.
   */
  start(
    event: OutboxEvent,
    handlers: readonly RegisteredHandler[],
    options: DeliverOptions,
  ): HandlerRun {
    const runs = handlers.map((handler) => this.run(handler, event, options));
    return {
      outcomes: Promise.all(runs.map((r) => r.outcome)),
      ended: all(runs.map((r) => r.ended)),
      released: all(runs.map((r) => r.released)),
    };
  }

  /** An event of a type nobody handles: said once per type, then settled as delivered. */
  reportUnhandled(type: string): void {
    if (this.unhandledTypes.has(type)) return;
    this.unhandledTypes.add(type);
    this.logger.warn(OutboxMessages.unhandledType(type));
  }

  private run(handler: RegisteredHandler, event: OutboxEvent, options: DeliverOptions): OneRun {
    return handler.limit && this.limits
      ? this.admitted(handler, event, options, this.limits)
      : this.unlimited(handler, event, options);
  }

  /**
   * A limited handler's run: started once its limit admits it, its place given back when it has
   * returned; held back, unstarted, when the limit has no room (or the lease no time left).
   */
  private admitted(
    handler: RegisteredHandler,
    event: OutboxEvent,
    options: DeliverOptions,
    limits: HandlerLimits,
  ): OneRun {
    const unstarted = (outcome: RunOutcome): OneRun => ({
      outcome: Promise.resolve(outcome),
      ended: SETTLED,
      released: SETTLED,
    });
    const started = limits
      .admit(handler, event.id)
      // The store reports its failures as results: anything thrown is a bug, held like one.
      .catch(() => limits.unasked(handler.name))
      .then((answer): OneRun => {
        if (!answer.admitted) return unstarted(answer.held);
        const { signal, latestStart = Infinity } = options;
        // Abandoned while it asked (a shutdown): the event keeps its lease, the place goes back.
        if (signal?.aborted) {
          answer.release(false);
          return unstarted({
            handlerName: handler.name,
            ok: false,
            error: signal.reason,
            timedOut: false,
          });
        }
        if (Date.now() > latestStart) {
          answer.release(false);
          return unstarted(limits.late(handler.name));
        }
        const run = this.unlimited(handler, event, options);
        void run.ended.then(() => answer.release(true));
        return run;
      });
    return {
      outcome: started.then((run) => run.outcome),
      ended: started.then((run) => run.ended),
      released: started.then((run) => run.released),
    };
  }

  private unlimited(
    handler: RegisteredHandler,
    event: OutboxEvent,
    options: DeliverOptions,
  ): OneRun {
    // One abort per run: the budget timer and the engine's abandon both fire it.
    const abort = new LazyAbort();
    let release = (): void => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const context: SlotReleasingContext = {
      handlerName: handler.name,
      attempt: options.attempt,
      handlerAttempt:
        options.handlerAttempts && Object.hasOwn(options.handlerAttempts, handler.name)
          ? options.handlerAttempts[handler.name]
          : 1,
      get signal() {
        return abort.signal;
      },
      idempotencyKey: `${handler.name}:${event.id}`,
      [RELEASE_SLOT]: () => release(),
    };
    const telemetry = this.telemetry.handlerRun(event, handler.name, context.handlerAttempt);
    if (!handler.isolationLevel) {
      // A synchronous throw becomes a rejection, contained like any other.
      const running = new Promise<unknown>((resolve) =>
        resolve(telemetry.within(() => handler.handle(event, context))),
      );
      const ended = running.then(
        () => undefined,
        () => undefined,
      );
      void ended.then(release);
      const raced = raceHandler(handler.name, handler.budgetMs, running, abort, options.signal);
      void raced.then((outcome) => telemetry.end(outcome));
      return { outcome: raced, ended, released };
    }
    if (!this.transactions) {
      // Registered through OutboxModule, a runner always has its transactions: this is a runner
      // built by hand, which must not run a transactional handler outside its transaction.
      const error = new InvalidOutboxHandlerTransactionError(
        handler.name,
        handler.location,
        true,
        true,
      );
      const outcome = { handlerName: handler.name, ok: false as const, error, timedOut: false };
      telemetry.end(outcome);
      return {
        outcome: Promise.resolve(outcome),
        ended: Promise.resolve(),
        released: Promise.resolve(),
      };
    }
    const { committed, ended } = this.transactions.run({
      event,
      attempt: options.attempt,
      handlerName: handler.name,
      settlesEvent: options.settlesEvent === true,
      budgetMs: handler.budgetMs,
      isolationLevel: handler.isolationLevel,
      signal: abort.signal,
      invoke: (transaction) =>
        telemetry.within(() => handler.handle(event, { ...context, ...transaction })),
    });
    const raced = raceHandler(handler.name, handler.budgetMs, committed, abort, options.signal);
    // A transaction that committed as its budget ran out did deliver: its outcome is the
    // transaction's, which the abort settles at once (rolled back, or committed just before).
    const outcome = raced.then((result) =>
      result.ok
        ? result
        : committed.then(
            () => ({ handlerName: handler.name, ok: true as const }),
            () => result,
          ),
    );
    void outcome.then((result) => telemetry.end(result));
    void ended.then(release);
    return { outcome, ended, released };
  }
}

/** Once every one has resolved; most events have one handler, whose promise serves as it is. */
function all(promises: Promise<void>[]): Promise<void> {
  return promises.length === 1 ? promises[0] : Promise.all(promises).then(() => undefined);
}
