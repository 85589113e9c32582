import { OutboxMessages } from './outbox.messages';

/** Base class of every error the outbox raises, so callers can catch them as one family. */
export abstract class OutboxError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** An enqueue or emit was attempted outside an open transaction; nothing was written. */
export class OutboxTransactionRequiredError extends OutboxError {
  constructor(readonly operation: string) {
    super(OutboxMessages.transactionRequired(operation));
  }
}

/** A payload or metadata value cannot round-trip through JSON; nothing was written. */
export class OutboxPayloadNotSerializableError extends OutboxError {
  constructor(
    readonly eventType: string,
    readonly path: string,
    readonly reason: string,
  ) {
    super(OutboxMessages.payloadNotSerializable(eventType, path, reason));
  }
}

/** An event is missing a required field or carries one of the wrong shape; nothing was written. */
export class InvalidOutboxEventError extends OutboxError {
  constructor(
    readonly field: string,
    readonly value: unknown,
    readonly expected: string,
  ) {
    super(OutboxMessages.invalidEvent(field, value, expected));
  }
}

/**
 * The database refused or failed an outbox statement. It keeps what an operator needs to act
 * (the SQLSTATE, the constraint, a scrubbed message) and deliberately no `cause`: the driver
 * error carries the failed query and its parameters, which hold whole payloads and secrets, and
 * would reach any log that prints the error.
 */
export class OutboxStoreError extends OutboxError {
  constructor(
    readonly operation: string,
    detail: string,
    /** SQLSTATE of the driver error, when there was one (for example `40P01`). */
    readonly code: string | undefined,
    /** The constraint the statement violated, when PostgreSQL named one. */
    readonly constraint?: string,
  ) {
    super(OutboxMessages.storeFailure(operation, detail));
  }
}

/**
 * An event id is already in the outbox with different content. An id names one event (it is
 * what handlers derive idempotency keys from), so a second, different event under it would
 * never be delivered; the statement's transaction should be rolled back.
 */
export class OutboxEventConflictError extends OutboxError {
  constructor(
    readonly eventId: string,
    /** The type of the event already stored under that id. */
    readonly storedType: string,
  ) {
    super(OutboxMessages.eventConflict(eventId, storedType));
  }
}

/** `OutboxModule` options failed validation; the boot stops here. */
export class InvalidOutboxOptionsError extends OutboxError {
  constructor(
    readonly problems: ReadonlyArray<{ path: string; value: unknown; messages: string[] }>,
  ) {
    super(OutboxMessages.invalidOptions(problems));
  }
}

/** `outboxMigrations()` was given an option it cannot use; nothing ran. */
export class InvalidOutboxMigrationsOptionsError extends OutboxError {
  constructor(
    /** The option (`concurrentIndexes`), or `options` for the argument itself. */
    readonly field: string,
    readonly value: unknown,
    expected = 'a boolean',
  ) {
    super(OutboxMessages.invalidMigrationsOption(field, value, expected));
  }
}

/** A handler name is not kebab-case; names are persisted, so they are kept to one shape. */
export class InvalidOutboxHandlerNameError extends OutboxError {
  constructor(
    readonly handlerName: unknown,
    readonly location: string,
  ) {
    super(OutboxMessages.invalidHandlerName(handlerName, location));
  }
}

/** Two handlers share one name for the same event type; their deliveries would collide. */
export class DuplicateOutboxHandlerError extends OutboxError {
  constructor(
    readonly handlerName: string,
    readonly eventType: string,
    readonly locations: readonly [string, string],
  ) {
    super(OutboxMessages.duplicateHandler(handlerName, eventType, locations));
  }
}

/** A handler lives on a request- or transient-scoped provider, which has no instance at delivery time. */
export class ScopedOutboxHandlerError extends OutboxError {
  constructor(
    readonly handlerName: string,
    readonly location: string,
  ) {
    super(OutboxMessages.scopedHandler(handlerName, location));
  }
}

/**
 * A handler is declared on a provider whose instance the explorer cannot reach at boot, so its
 * events would be marked delivered without it ever running.
 */
export class UnreachableOutboxHandlerError extends OutboxError {
  constructor(
    readonly handlerName: string,
    readonly location: string,
  ) {
    super(OutboxMessages.unreachableHandler(handlerName, location));
  }
}

/** A handler subscribes to no event type. */
export class EmptyOutboxHandlerEventsError extends OutboxError {
  constructor(
    readonly handlerName: string,
    readonly location: string,
    readonly events: unknown,
  ) {
    super(OutboxMessages.emptyHandlerEvents(handlerName, location, events));
  }
}

/** A handler's own `timeoutMs` is not a positive integer, or the lease cannot cover it. */
export class InvalidOutboxHandlerTimeoutError extends OutboxError {
  constructor(
    readonly handlerName: string,
    readonly location: string,
    readonly timeoutMs: unknown,
    readonly leaseMs: number,
  ) {
    super(OutboxMessages.invalidHandlerTimeout(handlerName, location, timeoutMs, leaseMs));
  }
}

/** A handler ran past its time budget; its signal was aborted. */
export class OutboxHandlerTimeoutError extends OutboxError {
  constructor(
    readonly handlerName: string,
    readonly budgetMs: number,
  ) {
    super(OutboxMessages.handlerTimeout(handlerName, budgetMs));
  }
}

/**
 * A transactional handler finished, but the claim that ran it no longer held the event (its
 * lease ran out and another instance claimed it, or it was settled): its transaction was rolled
 * back, so its writes never happened, and the current claim runs it.
 */
export class OutboxLeaseLostError extends OutboxError {
  constructor(
    readonly handlerName: string,
    readonly eventId: string,
    readonly attempt: number,
  ) {
    super(OutboxMessages.leaseLost(handlerName, eventId, attempt));
  }
}

/**
 * A handler's `transaction` option is neither a boolean nor `{ isolationLevel }` with a known
 * level, or the `EventDispatcher` it is registered with was built outside `OutboxModule`.
 */
export class InvalidOutboxHandlerTransactionError extends OutboxError {
  constructor(
    readonly handlerName: string,
    readonly location: string,
    readonly transaction: unknown,
    /** Set when the option is valid but this registry cannot open transactions. */
    unavailable = false,
  ) {
    super(
      unavailable
        ? OutboxMessages.transactionsUnavailable(handlerName, location)
        : OutboxMessages.invalidHandlerTransaction(handlerName, location, transaction),
    );
  }
}

/** `ctx.emit` was called after the handler's transaction had ended (committed or rolled back). */
export class OutboxHandlerTransactionEndedError extends OutboxError {
  constructor(readonly handlerName: string) {
    super(OutboxMessages.handlerTransactionEnded(handlerName));
  }
}

/** A handler's own `retry` or `maxAttempts` is out of range; the boot stops here. */
export class InvalidOutboxHandlerPolicyError extends OutboxError {
  constructor(
    readonly handlerName: string,
    readonly location: string,
    readonly field: string,
    readonly value: unknown,
    readonly expected: string,
  ) {
    super(OutboxMessages.invalidHandlerPolicy(handlerName, location, field, value, expected));
  }
}

/**
 * A handler's limit (`maxConcurrent`, `rate`, `limitPerPartition`) is not one the engine can
 * keep; names the handler, the field and the value.
 */
export class InvalidOutboxHandlerLimitError extends OutboxError {
  constructor(
    readonly handlerName: string,
    readonly location: string,
    readonly field: string,
    readonly value: unknown,
    readonly expected: string,
  ) {
    super(OutboxMessages.invalidHandlerLimit(handlerName, location, field, value, expected));
  }
}

/** An `OutboxAdmin` query was given a value it cannot use; names the field and the value. */
export class InvalidOutboxAdminQueryError extends OutboxError {
  constructor(
    readonly field: string,
    readonly value: unknown,
    expected: string,
  ) {
    super(OutboxMessages.invalidAdminQuery(field, value, expected));
  }
}

/**
 * A replay or discard by filter was refused because another change by filter is running, in
 * this process or another (any two filters may overlap, so one runs at a time); nothing was
 * changed. `running` is that change, null when it was starting and not seen yet.
 */
export class OutboxAdminChangeInProgressError extends OutboxError {
  constructor(
    readonly kind: 'replay' | 'discard',
    readonly running: {
      changeId: string;
      kind: string;
      actor: string | null;
      startedAt: Date;
      expiresAt: Date;
    } | null,
  ) {
    super(OutboxMessages.adminChangeInProgress(kind, running));
  }
}

/** `OutboxDashboardModule.forRoot` was given an option it cannot use; fails the boot. */
export class InvalidOutboxDashboardOptionsError extends OutboxError {
  constructor(
    readonly field: string,
    readonly value: unknown,
    expected: string,
  ) {
    super(OutboxMessages.invalidDashboardOption(field, value, expected));
  }
}
