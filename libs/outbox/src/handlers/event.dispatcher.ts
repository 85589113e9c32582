import { Inject, Injectable, Optional } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import {
  DuplicateOutboxHandlerError,
  EmptyOutboxHandlerEventsError,
  InvalidOutboxHandlerNameError,
  InvalidOutboxHandlerTimeoutError,
  InvalidOutboxHandlerTransactionError,
  InvalidOutboxOptionsError,
} from '../outbox.errors';
import { HandlerRunner, type DeliverOptions } from './handler.runner';
import type { RegisteredHandler } from './registered-handler';
import { ISOLATION_LEVELS } from '../outbox.constants';
import type { OutboxEvent } from '../outbox-event.types';
import {
  type HandlerOutcome,
  type OutboxHandlerFn,
  type OutboxIsolationLevel,
} from './outbox-handler.types';
import {
  LEASE_SETTLE_HEADROOM_MS,
  type OutboxHandlerOverride,
  type ResolvedOutboxOptions,
} from '../outbox.options';
import { OUTBOX_DATA_SOURCE, OUTBOX_OPTIONS } from '../outbox.tokens';
import type { EventOrdering, TypeOrdering } from '../store/emit/emit.store';
import {
  orderedSettles,
  withOverride,
  resolveHandlerPolicy,
  typeOrdering,
  type HandlerPolicy,
} from './handler.policy';
import type { OutboxHandlerMetadata } from './outbox.decorators';
import { resolveHandlerLimit } from './handler-limit';

/** The module's defaults, for a dispatcher built without options for them (unit tests). */
const DEFAULT_RETRY = { baseMs: 1000, maxMs: 300_000, jitter: 0.2 };
const DEFAULT_MAX_ATTEMPTS = 10;

const KEBAB_CASE = /^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/;
const EVERY_TYPE = '*';
const NO_HANDLERS: readonly never[] = [];

/** A handler as declared (by `@OnOutboxEvent` or by hand), with the function that runs it. */
export interface OutboxHandlerRegistration extends OutboxHandlerMetadata {
  handle: OutboxHandlerFn;
  /** Where the handler is declared (`Class.method`), for error messages. */
  location: string;
}

/** A handler of an event type with its retry policy and budget, as `policies` lists it. */
export interface HandlerWithPolicy {
  name: string;
  policy: HandlerPolicy;
  /** The handler's time budget. */
  budgetMs: number;
}

/**
 * The registry of named handlers: what `@OnOutboxEvent` declared, validated at boot, with each
 * handler's policy, looked up by event type. The engine runs what it finds here through
 * `HandlerRunner`; the emit asks it which handlers of a type are ordered.
 */
@Injectable()
export class EventDispatcher implements EventOrdering {
  private readonly byType = new Map<string, RegisteredHandler[]>();
  private readonly joined = new Map<string, readonly RegisteredHandler[]>();
  private orderings = new WeakMap<readonly RegisteredHandler[], TypeOrdering | undefined>();
  /** `orderedSettles()`, made at its first call after a registration; null until then. */
  private settles: { skipDead: readonly string[] } | undefined | null = null;
  /** For the deprecated `deliver`: made at its first call. */
  private runner: HandlerRunner | undefined;
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
    /** Where transactional handlers open their transactions; without it, none may register. */
    @Optional() @Inject(OUTBOX_DATA_SOURCE) private readonly dataSource?: DataSource,
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
    const limit = resolveHandlerLimit(registration);
    const budgetMs = timeoutMs ?? this.budgetMs;
    const eventTypes = new Set(types as string[]);
    for (const type of eventTypes) {
      const clash = this.clashing(name, type);
      if (clash) throw new DuplicateOutboxHandlerError(name, type, [clash.location, location]);
    }
    for (const type of eventTypes) {
      const list = this.byType.get(type) ?? [];
      list.push({ name, handle, location, budgetMs, isolationLevel, policy, limit });
      this.byType.set(type, list);
    }
    this.joined.clear();
    this.orderings = new WeakMap();
    this.settles = null;
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
    if (!this.dataSource) {
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
    return this.handlersOf(type).map((h) => h.name);
  }

  /** The handlers an event of this type goes to, with their retry policies. */
  policies(type: string): readonly HandlerWithPolicy[] {
    return this.handlersOf(type).map(({ name, policy, budgetMs }) => ({ name, policy, budgetMs }));
  }

  /**
   * What the engine's claims and settles need of the ordered handlers (see `orderedSettles`):
   * read at every claim and settle, so made once per set of registrations.
   */
  orderedSettles(): { skipDead: readonly string[] } | undefined {
    if (this.settles === null) this.settles = orderedSettles([...this.byType.values()].flat());
    return this.settles;
  }

  /** The ordered handlers of a type, for the emit to sequence its events; none: undefined. */
  orderingOf(type: string): TypeOrdering | undefined {
    const handlers = this.handlersOf(type);
    if (!this.orderings.has(handlers)) this.orderings.set(handlers, typeOrdering(handlers));
    return this.orderings.get(handlers);
  }

  /**
   * Runs every handler of the event's type that is not in `alreadyDelivered`, concurrently,
   * and returns one outcome per handler run.
   *
   * @deprecated The registry no longer runs handlers. This runs them outside the engine, with
   * no transaction (a transactional handler is reported failed); a test runs them through the
   * engine with `drainUntilIdle` from `nestjs-lease-outbox/testing`.
   */
  async deliver(
    event: OutboxEvent,
    alreadyDelivered: Readonly<Record<string, unknown>>,
    options: DeliverOptions,
  ): Promise<HandlerOutcome[]> {
    const handlers = this.handlersOf(event.type).filter(
      (h) => !Object.hasOwn(alreadyDelivered, h.name),
    );
    this.runner ??= new HandlerRunner();
    // Built without limits: every outcome is a handler's own.
    return this.runner.start(event, handlers, options).outcomes as Promise<HandlerOutcome[]>;
  }

  /**
   * Looked up for every claimed event: no array is built per call. Types with handlers of their
   * own and `'*'` handlers as well keep their joined list until the next registration (one per
   * registered type, so the cache is bounded).
   */
  handlersOf(type: string): readonly RegisteredHandler[] {
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
      type === EVERY_TYPE ? [...this.byType.values()].flat() : this.handlersOf(type);
    return candidates.find((h) => h.name === name);
  }
}
