import type { OutboxEvent } from '../outbox-event.types';
import type { HandlerFailure } from './outbox-event.entity';

/** The columns of an event as it was emitted, as statements return them. */
export interface EventRow {
  id: string;
  type: string;
  aggregate_type: string;
  aggregate_id: string;
  organization_id: string | null;
  request_id: string | null;
  payload: unknown;
  metadata: Record<string, unknown>;
  occurred_at: Date;
  causation_id: string | null;
  correlation_id: string | null;
  ordering_key: string | null;
}

/**
 * The columns of where an event's delivery stands: the attempts so far, the handlers that
 * delivered or failed it, and whether it is dead (a claim and an event's detail both read them).
 */
export interface DeliveryStateRow {
  attempts: number;
  deliveries: Record<string, string>;
  failures: Record<string, HandlerFailure>;
  dead_at: Date | null;
  last_error: string | null;
}

/** An event's ordering key: the one it was emitted with, else its aggregate's. */
export function orderingKeyOf(
  row: Pick<EventRow, 'ordering_key' | 'aggregate_type' | 'aggregate_id'>,
): string {
  return row.ordering_key ?? `${row.aggregate_type}:${row.aggregate_id}`;
}

/** The event of a row, as handlers and operators see it. */
export function toEvent(row: EventRow): OutboxEvent {
  return {
    id: row.id,
    type: row.type,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    organizationId: row.organization_id,
    requestId: row.request_id,
    payload: row.payload,
    metadata: row.metadata,
    occurredAt: row.occurred_at,
    causationId: row.causation_id,
    correlationId: row.correlation_id,
    orderingKey: orderingKeyOf(row),
  };
}
