import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import {
  DuplicateOutboxHandlerError,
  EmptyOutboxHandlerEventsError,
  InvalidOutboxHandlerNameError,
  InvalidOutboxHandlerTimeoutError,
  InvalidOutboxHandlerTransactionError,
  InvalidOutboxOptionsError,
} from '../outbox.errors';
import { HandlerTransactions } from './handler.transactions';
import { OutboxTelemetry } from '../telemetry/outbox.telemetry';
import { OutboxMessages } from '../outbox.messages';
import { ISOLATION_LEVELS } from '../outbox.constants';
import type { OutboxEvent } from '../outbox-event.types';
import {
  type HandlerContext,
  type HandlerOutcome,
  type OnOutboxEventOptions,
  type OutboxHandlerFn,
  type OutboxIsolationLevel,
} from './outbox-handler.types';
import {
  LEASE_SETTLE_HEADROOM_MS,
  type OutboxHandlerOverride,
  type ResolvedOutboxOptions,
} from '../outbox.options';
import { OUTBOX_OPTIONS } from '../outbox.tokens';
import type { TypeOrdering } from '../store/emit/emit.store';
import {
  orderedSettles,
  withOverride,
  resolveHandlerPolicy,
  typeOrdering,
  type HandlerPolicy,
} from './handler.policy';
import { LazyAbort } from './lazy-abort';
import { raceHandler } from './handler-race';

/** The module's defaults, for a dispatcher built without options for them (unit tests). */
const DEFAULT_RETRY = { baseMs: 1000, maxMs: 300_000, jitter: 0.2 };
const DEFAULT_MAX_ATTEMPTS = 10;

const KEBAB_CASE = /^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/;
const EVERY_TYPE = '*';
const NO_HANDLERS: readonly never[] = [];

export interface OutboxHandlerRegistration {
  name: string;
  events: readonly string[] | '*';
  /** The handler's own budget; the module's `handlerTimeoutMs` when absent. */
  timeoutMs?: number;
  /** Run in a transaction that also records the delivery (see `OnOutboxEventOptions`). */
  transaction?: OnOutboxEventOptions['transaction'];
  /** The handler's own retry schedule; the module's `retry` when absent. */
  retry?: OnOutboxEventOptions['retry'];
  /** The handler's own attempts; the module's `maxAttempts` when absent. */
  maxAttempts?: number;
  /** One event of a key at a time, in commit order (see `OnOutboxEventOptions`). */
  ordered?: OnOutboxEventOptions['ordered'];
  handle: OutboxHandlerFn;
  /** Where the handler is declared (`Class.method`), for error messages. */
  location: string;
}

interface RegisteredHandler {
  name: string;
  handle: OutboxHandlerFn;
  location: string;
  budgetMs: number;
  /** Set for a transactional handler: the isolation level of its transaction. */
  isolationLevel: OutboxIsolationLevel | undefined;
  policy: HandlerPolicy;
}

/** A handler of an event type with its retry policy, as the executor settles them. */
export interface HandlerWithPolicy {
  name: string;
  policy: HandlerPolicy;
  /** The handler's time budget. */
  budgetMs: number;
}

/** The handlers of one event, started: see `EventDispatcher.execute`. */
export interface HandlerRun {
  /** One outcome per handler, each at its end or when its budget is spent. */
  outcomes: Promise<HandlerOutcome[]>;
  /** Every handler has really returned (or thrown), budget or not. */
  ended: Promise<void>;
}

export interface DeliverOptions {
  /** The event's attempt number, passed to handlers. */
  attempt: number;
  /** Aborts every handler of this delivery (the dispatcher abandoning them at shutdown). */
  signal?: AbortSignal;
  /** Each handler's own try of this event (1 when absent), passed as `ctx.handlerAttempt`. */
  handlerAttempts?: Readonly<Record<string, number>>;
}

/**
 * The registry of named handlers and the one place they are run. Each handler gets its own
 * time budget and AbortSignal; a handler that throws (synchronously or not) or runs over its
 * budget is reported as a failure and never stops the others.
 */
@Injectable()
export class EventDispatcher {
  private readonly logger = new Logger('Outbox');
  private readonly byType = new Map<string, RegisteredHandler[]>();
  private readonly joined = new Map<string, readonly RegisteredHandler[]>();
  private policyLists = new WeakMap<readonly RegisteredHandler[], readonly HandlerWithPolicy[]>();
  private orderings = new WeakMap<readonly RegisteredHandler[], TypeOrdering | undefined>();
  /** Types already reported as having no handler, so each is logged once. */
  private readonly unhandledTypes = new Set<string>();
  private readonly budgetMs: number;
  private readonly leaseMs: number;
  /** The module's `retry` and `maxAttempts`, for handlers without their own. */
  readonly defaultPolicy: HandlerPolicy;
  /** The module's `handlers` option: policy by handler name, over the decorators'. */
  private readonly overrides: Readonly<Record<string, OutboxHandlerOverride>>;

  constructor(
    @Inject(OUTBOX_OPTIONS)
    options: Pick<ResolvedOutboxOptions, 'handlerTimeoutMs'> &
      Partial<Pick<ResolvedOutboxOptions, 'leaseMs' | 'retry' | 'maxAttempts' | 'handlers'>>,
    @Optional() private readonly transactions?: HandlerTransactions,
    @Optional() private readonly telemetry: OutboxTelemetry = new OutboxTelemetry(),
  ) {
    this.budgetMs = options.handlerTimeoutMs;
    this.leaseMs = options.leaseMs ?? Infinity;
    this.overrides = options.handlers ?? {};
    this.defaultPolicy = {
      retry: options.retry ?? DEFAULT_RETRY,
      maxAttempts: options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
      ordered: null,
    };
  }

  /** Adds a handler; throws a typed error for a bad name, no events or a name clash. */
  register(declared: OutboxHandlerRegistration): void {
    const registration = this.withOverride(declared);
    const { name, events, handle, location, timeoutMs } = registration;
    if (typeof name !== 'string' || !KEBAB_CASE.test(name)) {
      throw new InvalidOutboxHandlerNameError(name, location);
    }
    const types: unknown = events === EVERY_TYPE ? [EVERY_TYPE] : events;
    if (
      !Array.isArray(types) ||
      types.length === 0 ||
      types.some((t) => typeof t !== 'string' || t === '')
    ) {
      throw new EmptyOutboxHandlerEventsError(name, location, events);
    }
    if (
      timeoutMs !== undefined &&
      (!Number.isInteger(timeoutMs) ||
        timeoutMs < 1 ||
        timeoutMs + LEASE_SETTLE_HEADROOM_MS > this.leaseMs)
    ) {
      throw new InvalidOutboxHandlerTimeoutError(name, location, timeoutMs, this.leaseMs);
    }
    const isolationLevel = this.isolationLevelOf(registration);
    const policy = resolveHandlerPolicy(registration, this.defaultPolicy);
    const budgetMs = timeoutMs ?? this.budgetMs;
    const eventTypes = new Set(types as string[]);
    for (const type of eventTypes) {
      const clash = this.clashing(name, type);
      if (clash) throw new DuplicateOutboxHandlerError(name, type, [clash.location, location]);
    }
    for (const type of eventTypes) {
      const list = this.byType.get(type) ?? [];
      list.push({ name, handle, location, budgetMs, isolationLevel, policy });
      this.byType.set(type, list);
    }
    this.joined.clear();
    this.policyLists = new WeakMap();
    this.orderings = new WeakMap();
  }

  /** The registration with the module's `handlers` option for its name applied. */
  private withOverride(declared: OutboxHandlerRegistration): OutboxHandlerRegistration {
    const override = Object.hasOwn(this.overrides, declared.name)
      ? this.overrides[declared.name]
      : undefined;
    return override ? withOverride(declared, override) : declared;
  }

  /**
   * Fails when the module's `handlers` option names a handler nobody registered: a typo there
   * would otherwise leave the handler on its declared policy without a word.
   */
  assertOverridesUsed(): void {
    const registered = new Set([...this.byType.values()].flat().map((h) => h.name));
    const unknown = Object.keys(this.overrides).filter((name) => !registered.has(name));
    if (unknown.length === 0) return;
    throw new InvalidOutboxOptionsError(
      unknown.map((name) => ({
        path: `handlers.${name}`,
        value: this.overrides[name],
        messages: [`no @OnOutboxEvent handler is named "${name}"`],
      })),
    );
  }

  private isolationLevelOf(
    registration: OutboxHandlerRegistration,
  ): OutboxIsolationLevel | undefined {
    const { name, location, transaction } = registration;
    if (transaction === undefined || transaction === false) return undefined;
    const level =
      transaction === true
        ? 'READ COMMITTED'
        : typeof transaction === 'object' && transaction !== null && !Array.isArray(transaction)
          ? (transaction.isolationLevel ?? 'READ COMMITTED')
          : undefined;
    if (!ISOLATION_LEVELS.includes(level as OutboxIsolationLevel)) {
      throw new InvalidOutboxHandlerTransactionError(name, location, transaction);
    }
    if (!this.transactions) {
      throw new InvalidOutboxHandlerTransactionError(name, location, transaction, true);
    }
    return level;
  }

  /** Every subscribed type (`'*'` included) with the names of its handlers. */
  subscriptions(): Array<{ type: string; handlers: string[] }> {
    return [...this.byType].map(([type, handlers]) => ({
      type,
      handlers: handlers.map((h) => h.name),
    }));
  }

  /** One line per subscribed type with its handlers, for the boot log. */
  describe(): string[] {
    return this.subscriptions().map(({ type, handlers }) => `${type} -> ${handlers.join(', ')}`);
  }

  /** Names of the handlers an event of this type goes to. */
  handlerNames(type: string): string[] {
    return this.handlersFor(type).map((h) => h.name);
  }

  /** The handlers an event of this type goes to, with their retry policies. */
  policies(type: string): readonly HandlerWithPolicy[] {
    // Asked for every claimed event: one list per handler list, made once.
    const handlers = this.handlersFor(type);
    let policies = this.policyLists.get(handlers);
    if (!policies) {
      policies = Object.freeze(
        handlers.map(({ name, policy, budgetMs }) => Object.freeze({ name, policy, budgetMs })),
      );
      this.policyLists.set(handlers, policies);
    }
    return policies;
  }

  /** What the engine's claims and settles need of the ordered handlers (see `orderedSettles`). */
  orderedSettles(): { skipDead: readonly string[] } | undefined {
    return orderedSettles([...this.byType.values()].flat());
  }

  /** The ordered handlers of a type, for the emit to sequence its events; none: undefined. */
  orderingOf(type: string): TypeOrdering | undefined {
    const handlers = this.handlersFor(type);
    if (!this.orderings.has(handlers)) this.orderings.set(handlers, typeOrdering(handlers));
    return this.orderings.get(handlers);
  }

  /**
   * Runs every handler of the event's type that is not in `alreadyDelivered`, concurrently,
   * and returns one outcome per handler run.
   */
  async deliver(
    event: OutboxEvent,
    alreadyDelivered: Readonly<Record<string, unknown>>,
    options: DeliverOptions,
  ): Promise<HandlerOutcome[]> {
    return this.execute(event, alreadyDelivered, options).outcomes;
  }

  /**
   * Starts the handlers `deliver` would run and reports on them twice: `outcomes` as soon as
   * each has ended or spent its budget (what gets settled), `ended` once every one of them has
   * really returned. A handler past its budget that ignores its AbortSignal is still running
   * between the two; the engine keeps its slot busy until `ended`, so a hung downstream cannot
   * pile up more concurrent work than the slots allow.
   */
  execute(
    event: OutboxEvent,
    alreadyDelivered: Readonly<Record<string, unknown>>,
    options: DeliverOptions,
  ): HandlerRun {
    const handlers = this.handlersFor(event.type);
    if (handlers.length === 0) this.reportUnhandled(event.type);
    const runs = handlers
      .filter((h) => !Object.hasOwn(alreadyDelivered, h.name))
      .map((handler) => this.run(handler, event, options));
    return {
      outcomes: Promise.all(runs.map((r) => r.outcome)),
      ended: Promise.all(runs.map((r) => r.ended)).then(() => undefined),
    };
  }

  private reportUnhandled(type: string): void {
    if (this.unhandledTypes.has(type)) return;
    this.unhandledTypes.add(type);
    this.logger.warn(OutboxMessages.unhandledType(type));
  }

  /**
   * Looked up for every claimed event: no array is built per call. Types with handlers of their
   * own and `'*'` handlers as well keep their joined list until the next registration (one per
   * registered type, so the cache is bounded).
   */
  private handlersFor(type: string): readonly RegisteredHandler[] {
    const specific = this.byType.get(type);
    const wildcard = this.byType.get(EVERY_TYPE);
    if (!wildcard) return specific ?? NO_HANDLERS;
    if (!specific) return wildcard;
    let joined = this.joined.get(type);
    if (!joined) {
      joined = [...specific, ...wildcard];
      this.joined.set(type, joined);
    }
    return joined;
  }

  private clashing(name: string, type: string): RegisteredHandler | undefined {
    const candidates =
      type === EVERY_TYPE ? [...this.byType.values()].flat() : this.handlersFor(type);
    return candidates.find((h) => h.name === name);
  }

  private run(
    handler: RegisteredHandler,
    event: OutboxEvent,
    options: DeliverOptions,
  ): { outcome: Promise<HandlerOutcome>; ended: Promise<void> } {
    // One abort per run: the budget timer and the dispatcher's abandon both fire it.
    const abort = new LazyAbort();
    const context: HandlerContext = {
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
    };
    const telemetry = this.telemetry.handlerRun(event, handler.name, context.handlerAttempt);
    let running: Promise<unknown>;
    let ended: Promise<void>;
    if (handler.isolationLevel && this.transactions) {
      ({ committed: running, ended } = this.transactions.run({
        event,
        attempt: options.attempt,
        handlerName: handler.name,
        budgetMs: handler.budgetMs,
        isolationLevel: handler.isolationLevel,
        signal: abort.signal,
        invoke: (transaction) =>
          telemetry.within(() => handler.handle(event, { ...context, ...transaction })),
      }));
    } else {
      // The executor turns a synchronous throw into a rejection, contained like any other.
      running = new Promise<unknown>((resolve) =>
        resolve(telemetry.within(() => handler.handle(event, context))),
      );
      ended = running.then(
        () => undefined,
        () => undefined,
      );
    }
    const raced = raceHandler(handler.name, handler.budgetMs, running, abort, options.signal);
    if (!handler.isolationLevel) {
      void raced.then((outcome) => telemetry.end(outcome));
      return { outcome: raced, ended };
    }
    // A transaction that committed as its budget ran out did deliver: its outcome is the
    // transaction's, which the abort settles at once (rolled back, or committed just before).
    const settled = running;
    const outcome = raced.then((result) =>
      result.ok
        ? result
        : settled.then(
            () => ({ handlerName: handler.name, ok: true as const }),
            () => result,
          ),
    );
    void outcome.then((result) => telemetry.end(result));
    return { outcome, ended };
  }
}
