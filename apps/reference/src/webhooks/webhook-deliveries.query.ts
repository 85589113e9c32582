import { Injectable } from '@nestjs/common';
import { OutboxAdmin, type OutboxEventDetail, type OutboxEventState } from '@app/outbox';
import {
  WEBHOOK_DELIVERY_EVENT,
  WEBHOOK_SENDER,
  type WebhookDeliveryPayload,
} from './webhook-delivery';

/** A delivery as the API shows it: its state, never its body or the endpoint's secret. */
export interface DeliveryView {
  /** The delivery event's id, sent as `webhook-id`. */
  id: string;
  endpointId: string;
  eventId: string;
  eventType: string;
  organizationId: string;
  /** The delivery event's state in the outbox. */
  status: OutboxEventState;
  /** POSTs tried so far. */
  attempts: number;
  lastError: string | null;
  nextAttemptAt: string | null;
  deliveredAt: string | null;
  deadAt: string | null;
  createdAt: string;
}

/**
 * Deliveries are `webhook.delivery` outbox events, read through `OutboxAdmin.events`: their state
 * is the outbox's, their tries are `webhook-sender`'s failures plus its success.
 */
@Injectable()
export class WebhookDeliveriesQuery {
  constructor(private readonly outbox: OutboxAdmin) {}

  /** The organization's deliveries, newest first (`limit`: 1 to 500). */
  async list(organizationId: string, limit: number): Promise<DeliveryView[]> {
    const { items } = await this.outbox.events(
      { types: [WEBHOOK_DELIVERY_EVENT], organizationId },
      { limit },
    );
    return items.map((event) => toView(organizationId, event));
  }

  /** One delivery of the organization, or null. */
  async find(organizationId: string, id: string): Promise<DeliveryView | null> {
    const { items } = await this.outbox.events({
      types: [WEBHOOK_DELIVERY_EVENT],
      organizationId,
      ids: [id],
    });
    return items.length > 0 ? toView(organizationId, items[0]) : null;
  }
}

function toView(organizationId: string, event: OutboxEventDetail): DeliveryView {
  const payload = event.payload as WebhookDeliveryPayload;
  return {
    id: event.id,
    endpointId: event.aggregateId,
    eventId: payload.eventId,
    eventType: payload.eventType,
    organizationId,
    status: event.state,
    attempts:
      (event.failures[WEBHOOK_SENDER]?.count ?? 0) +
      (Object.hasOwn(event.deliveries, WEBHOOK_SENDER) ? 1 : 0),
    lastError: event.lastError,
    nextAttemptAt: event.nextAttemptAt?.toISOString() ?? null,
    deliveredAt: event.dispatchedAt?.toISOString() ?? null,
    deadAt: event.deadAt?.toISOString() ?? null,
    createdAt: event.occurredAt.toISOString(),
  };
}
