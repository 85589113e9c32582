/** The event as a handler sees it: what was emitted, without the outbox's bookkeeping. */
export interface OutboxEvent<P = unknown> {
  id: string;
  type: string;
  aggregateType: string;
  aggregateId: string;
  organizationId: string | null;
  requestId: string | null;
  payload: P;
  metadata: Record<string, unknown>;
  occurredAt: Date;
  /** The event whose handler emitted this one, or null. */
  causationId: string | null;
  /** The chain this event belongs to, or null (see `NewOutboxEvent.correlationId`). */
  correlationId: string | null;
  /**
   * The key that orders this event: `NewOutboxEvent.orderingKey` when the emitter set one, else
   * `aggregateType + ':' + aggregateId`.
   */
  orderingKey: string;
}

/** An event to write to the outbox, inside the caller's transaction. */
export interface NewOutboxEvent<P = unknown> {
  /** A UUID for idempotent emission; a time-ordered UUIDv7 is generated when absent. */
  id?: string;
  /** The event type handlers subscribe to, for example `invoice.paid`. */
  type: string;
  aggregateType: string;
  aggregateId: string;
  organizationId?: string | null;
  requestId?: string | null;
  /** Any JSON value; refused before anything is written when it cannot round-trip. */
  payload: P;
  /** Trace context, headers and similar; a JSON object. */
  metadata?: Record<string, unknown>;
  /**
   * The id of the event this one follows from. `ctx.emit` in a transactional handler sets it to
   * the event being handled.
   */
  causationId?: string | null;
  /**
   * Names the chain of events this one belongs to (any text, for example an upstream request's
   * correlation id). `ctx.emit` carries the parent's over, or the parent's own id when the parent
   * has none, so every event of a chain shares the id of its first event.
   */
  correlationId?: string | null;
  /**
   * The key that orders this event among others (a non-empty string of at most 256
   * characters, for example `account:42`); `aggregateType + ':' + aggregateId` when absent.
   */
  orderingKey?: string | null;
  /**
   * The partition fair claims share out by (a non-empty string of at most 256 characters, for
   * example a tenant that is not the organization); `organizationId` when absent. See
   * `OutboxFairnessOptions`. Written only when set: an app that never sets it needs no migration
   * past the ones before `OutboxFairClaims1775000000000` to emit.
   */
  partitionKey?: string | null;
}

/** Payload of the `outbox.event.dead` announcement. */
export interface OutboxEventDeadPayload {
  eventId: string;
  type: string;
  aggregateType: string;
  aggregateId: string;
  attempts: number;
  failedHandlers: string[];
  lastError: string | null;
}
