import { v5 as uuidv5 } from 'uuid';
import { isUuid } from '../common/uuid.util';
import type { NewOutboxEvent } from '../outbox-event.types';
import type { InboxMessage } from './bridge.types';
import { RELAY_HEADERS } from './relay-message';

/**
 * The namespace of event ids made from broker message ids that are not UUIDs: the same message
 * id always gives the same event id, so the outbox's idempotent emit still deduplicates.
 */
export const INBOX_ID_NAMESPACE = '6f0f7a52-9d3e-4c1b-8f57-4b0c1d2e3a91';

/** Why a message cannot become an event: the inbox rejects it to the dead letters. */
export class InboxMessageRejection extends Error {}

/**
 * The event id of a message: its UUID as it is, or a UUIDv5 of whatever id the broker gave it.
 * A message without an id cannot be deduplicated and is refused.
 */
export function inboxEventId(message: InboxMessage, fromHeader: string | undefined): string {
  const id = fromHeader ?? message.id;
  if (!id) throw new InboxMessageRejection('the message has no id (outbox-event-id or message id)');
  return isUuid(id) ? id.toLowerCase() : uuidv5(id, INBOX_ID_NAMESPACE);
}

/**
 * The event a relayed message stands for, read from the relay's headers (see `RELAY_HEADERS`)
 * and its JSON body. A message from elsewhere needs the inbox's own `toEvent`.
 */
export function relayedEvent(message: InboxMessage): NewOutboxEvent {
  const h = message.headers;
  const required = (name: string): string => {
    const value = h[name];
    if (!value) {
      throw new InboxMessageRejection(
        `the message has no ${name} header (give the inbox a toEvent for messages not sent by a relay)`,
      );
    }
    return value;
  };
  const metadata: Record<string, unknown> = {};
  if (h[RELAY_HEADERS.traceparent]) metadata.traceparent = h[RELAY_HEADERS.traceparent];
  if (h[RELAY_HEADERS.tracestate]) metadata.tracestate = h[RELAY_HEADERS.tracestate];
  return {
    id: inboxEventId(message, h[RELAY_HEADERS.id]),
    type: required(RELAY_HEADERS.type),
    aggregateType: required(RELAY_HEADERS.aggregateType),
    aggregateId: required(RELAY_HEADERS.aggregateId),
    orderingKey: h[RELAY_HEADERS.orderingKey] || null,
    causationId: h[RELAY_HEADERS.causationId] || null,
    correlationId: h[RELAY_HEADERS.correlationId] || null,
    organizationId: h[RELAY_HEADERS.organizationId] || null,
    requestId: h[RELAY_HEADERS.requestId] || null,
    metadata,
    payload: jsonBody(message),
  };
}

/** The message's body as JSON, or a rejection that says it is not. */
export function jsonBody(message: InboxMessage): unknown {
  try {
    return JSON.parse(message.body.toString('utf8'));
  } catch {
    throw new InboxMessageRejection(`the body is not JSON (${message.body.length} bytes)`);
  }
}
