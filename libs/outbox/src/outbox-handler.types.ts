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
}

export interface HandlerContext {
  /** The persisted name this handler was registered under. */
  handlerName: string;
  /** The attempt of the event (1 on first delivery); counts across all handlers of the event. */
  attempt: number;
  /** Aborts when the handler's time budget is spent or the dispatcher abandons it at shutdown. */
  signal: AbortSignal;
  /**
   * `<handlerName>:<eventId>`: the same on every redelivery of this event to this handler, so
   * side effects keyed by it (mail, payments, webhooks) happen once.
   */
  idempotencyKey: string;
}

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
}

/** What `EventDispatcher.deliver` reports for one handler. */
export type HandlerOutcome =
  | { handlerName: string; ok: true }
  | { handlerName: string; ok: false; error: unknown; timedOut: boolean };
