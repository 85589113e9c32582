import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { WEBHOOK_DELIVERY_EVENT, WEBHOOK_SENDER } from './webhook-delivery';

/** A delivery as the API shows it: its state, never its body or the endpoint's secret. */
export interface DeliveryView {
  /** The delivery event's id, sent as `webhook-id`. */
  id: string;
  endpointId: string;
  eventId: string;
  eventType: string;
  organizationId: string;
  status: 'pending' | 'retrying' | 'delivered' | 'dead';
  /** POSTs tried so far. */
  attempts: number;
  lastError: string | null;
  nextAttemptAt: string | null;
  deliveredAt: string | null;
  deadAt: string | null;
  createdAt: string;
}

interface DeliveryRow {
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  organization_id: string;
  attempts: number;
  failed: boolean;
  last_error: string | null;
  next_attempt_at: Date;
  dispatched_at: Date | null;
  dead_at: Date | null;
  occurred_at: Date;
}

/**
 * Deliveries are `webhook.delivery` outbox events: their state is the outbox's (delivered,
 * dead, retrying), their tries are `webhook-sender`'s failures plus its success.
 */
@Injectable()
export class WebhookDeliveriesQuery {
  constructor(private readonly dataSource: DataSource) {}

  /** The organization's deliveries, newest first. */
  async list(organizationId: string, limit: number): Promise<DeliveryView[]> {
    const rows: DeliveryRow[] = await this.dataSource.query(
      `${SELECT_DELIVERIES} ORDER BY occurred_at DESC, id DESC LIMIT $4`,
      [WEBHOOK_SENDER, WEBHOOK_DELIVERY_EVENT, organizationId, limit],
    );
    return rows.map(toView);
  }

  /** One delivery of the organization, or null. */
  async find(organizationId: string, id: string): Promise<DeliveryView | null> {
    const rows: DeliveryRow[] = await this.dataSource.query(`${SELECT_DELIVERIES} AND id = $4`, [
      WEBHOOK_SENDER,
      WEBHOOK_DELIVERY_EVENT,
      organizationId,
      id,
    ]);
    return rows.length > 0 ? toView(rows[0]) : null;
  }
}

/** $1 the sender's handler name, $2 the delivery event type, $3 the organization id. */
const SELECT_DELIVERIES = `
  SELECT id, aggregate_id AS endpoint_id, payload ->> 'eventId' AS event_id,
         payload ->> 'eventType' AS event_type, organization_id,
         coalesce((failures -> $1::text ->> 'count')::int, 0)
           + CASE WHEN deliveries ? $1::text THEN 1 ELSE 0 END AS attempts,
         failures ? $1::text AS failed,
         last_error, next_attempt_at, dispatched_at, dead_at, occurred_at
  FROM outbox_event
  WHERE type = $2 AND organization_id = $3`;

function toView(row: DeliveryRow): DeliveryView {
  const status = row.dispatched_at
    ? 'delivered'
    : row.dead_at
      ? 'dead'
      : row.failed
        ? 'retrying'
        : 'pending';
  return {
    id: row.id,
    endpointId: row.endpoint_id,
    eventId: row.event_id,
    eventType: row.event_type,
    organizationId: row.organization_id,
    status,
    attempts: row.attempts,
    lastError: row.last_error,
    nextAttemptAt: status === 'delivered' ? null : row.next_attempt_at.toISOString(),
    deliveredAt: row.dispatched_at?.toISOString() ?? null,
    deadAt: row.dead_at?.toISOString() ?? null,
    createdAt: row.occurred_at.toISOString(),
  };
}
