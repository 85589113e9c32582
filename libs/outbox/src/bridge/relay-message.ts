import type { OutboxEvent } from '../outbox-event.types';
import type { OutboxRelayMessage } from './bridge.types';

/**
 * The headers a relay puts on every message and an inbox reads back. Names are lower case (AMQP
 * header tables and NATS headers keep them as given) and carry no payload, only what routes,
 * orders and traces the event.
 */
export const RELAY_HEADERS = {
  id: 'outbox-event-id',
  type: 'outbox-event-type',
  aggregateType: 'outbox-aggregate-type',
  aggregateId: 'outbox-aggregate-id',
  orderingKey: 'outbox-ordering-key',
  causationId: 'outbox-causation-id',
  correlationId: 'outbox-correlation-id',
  organizationId: 'outbox-organization-id',
  requestId: 'outbox-request-id',
  occurredAt: 'outbox-occurred-at',
  traceparent: 'traceparent',
  tracestate: 'tracestate',
} as const;

export const RELAY_CONTENT_TYPE = 'application/json';

/** The message a relay sends for an event: its headers, and its payload as JSON. */
export function relayMessage(event: OutboxEvent): OutboxRelayMessage {
  const headers: Record<string, string> = {
    [RELAY_HEADERS.id]: event.id,
    [RELAY_HEADERS.type]: event.type,
    [RELAY_HEADERS.aggregateType]: event.aggregateType,
    [RELAY_HEADERS.aggregateId]: event.aggregateId,
    [RELAY_HEADERS.orderingKey]: event.orderingKey,
    [RELAY_HEADERS.occurredAt]: event.occurredAt.toISOString(),
  };
  const optional: Array<[string, unknown]> = [
    [RELAY_HEADERS.causationId, event.causationId],
    [RELAY_HEADERS.correlationId, event.correlationId],
    [RELAY_HEADERS.organizationId, event.organizationId],
    [RELAY_HEADERS.requestId, event.requestId],
    [RELAY_HEADERS.traceparent, event.metadata?.traceparent],
    [RELAY_HEADERS.tracestate, event.metadata?.tracestate],
  ];
  for (const [name, value] of optional) {
    if (typeof value === 'string' && value !== '') headers[name] = value;
  }
  return { event, headers, body: Buffer.from(JSON.stringify(event.payload ?? null)) };
}
