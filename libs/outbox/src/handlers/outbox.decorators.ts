import { SetMetadata } from '@nestjs/common';
import type { OnOutboxEventOptions } from './outbox-handler.types';

export const OUTBOX_HANDLER_METADATA = 'nestjs-lease-outbox:handler';

export interface OutboxHandlerMetadata {
  name: string;
  events: readonly string[] | '*';
  timeoutMs?: number;
  transaction?: OnOutboxEventOptions['transaction'];
  retry?: OnOutboxEventOptions['retry'];
  maxAttempts?: number;
  ordered?: OnOutboxEventOptions['ordered'];
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
  });
