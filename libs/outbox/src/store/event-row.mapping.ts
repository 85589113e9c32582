import type { OutboxEvent } from '../outbox-event.types';

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
  };
}
