import { SetMetadata } from '@nestjs/common';
import type { OnOutboxEventOptions } from './outbox-handler.types';

export const OUTBOX_HANDLER_METADATA = 'nestjs-lease-outbox:handler';

/** What `@OnOutboxEvent` declares of a handler: its name, its events and its own settings. */
export interface OutboxHandlerMetadata {
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
  /** Limits across processes (see `OnOutboxEventOptions`). */
  maxConcurrent?: number;
  rate?: OnOutboxEventOptions['rate'];
  limitPerPartition?: boolean;
}

/**
 * Marks a provider method as a named outbox handler. The name is persisted in each event's
 * `deliveries`, so it must stay stable: renaming a handler makes it a new handler that receives
 * every event claimed after the deploy. Checked at boot (kebab-case, unique per event type, a
 * singleton provider, at least one event).
 *
 * @example
 * @OnOutboxEvent('webhook-fanout', { events: ['invoice.paid', 'member.invited'], timeoutMs: 30_000 })
 * async handle(event: OutboxEvent<InvoicePaid>, ctx: HandlerContext) { ... }
 */
export const OnOutboxEvent = (name: string, options: OnOutboxEventOptions): MethodDecorator =>
  SetMetadata<string, OutboxHandlerMetadata>(OUTBOX_HANDLER_METADATA, {
    name,
    events: options?.events,
    timeoutMs: options?.timeoutMs,
    transaction: options?.transaction,
    retry: options?.retry,
    maxAttempts: options?.maxAttempts,
    ordered: options?.ordered,
    maxConcurrent: options?.maxConcurrent,
    rate: options?.rate,
    limitPerPartition: options?.limitPerPartition,
  });
