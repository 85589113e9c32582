import { Injectable } from '@nestjs/common';
import { isUUID } from 'class-validator';
import { OnOutboxEvent, type OutboxEvent } from '@app/outbox';
import { PUBLIC_EVENT_TYPES } from '../events/event-catalog';
import { WebhookDeliveryRepository } from './webhook-delivery.repository';
import { WebhookWake } from './webhook-wake';

/** The JSON every endpoint receives, in the Standard Webhooks payload shape. */
export interface WebhookBody {
  type: string;
  /** When the event occurred (ISO 8601), not when it was sent. */
  timestamp: string;
  data: Record<string, unknown> & {
    eventId: string;
    organizationId: string;
    aggregateType: string;
    aggregateId: string;
  };
}

/**
 * Turns each public event into one delivery row per subscribed endpoint of its organization.
 * It only writes rows (one short statement, its own transaction); the POSTs are the
 * `WebhookSender`'s, so a slow endpoint never holds an outbox event or another endpoint.
 */
@Injectable()
export class WebhookFanout {
  constructor(
    private readonly deliveries: WebhookDeliveryRepository,
    private readonly wake: WebhookWake,
  ) {}

  @OnOutboxEvent('webhook-fanout', { events: PUBLIC_EVENT_TYPES })
  async handle(event: OutboxEvent<Record<string, unknown>>): Promise<void> {
    const organizationId = event.organizationId;
    // Endpoints belong to organizations (uuid); an event without one has nobody to tell.
    if (!organizationId || !isUUID(organizationId)) return;
    const body: WebhookBody = {
      type: event.type,
      timestamp: event.occurredAt.toISOString(),
      data: {
        ...event.payload,
        eventId: event.id,
        organizationId,
        aggregateType: event.aggregateType,
        aggregateId: event.aggregateId,
      },
    };
    const inserted = await this.deliveries.fanOut({
      eventId: event.id,
      organizationId,
      eventType: event.type,
      body,
    });
    if (inserted.length > 0) this.wake.wake();
  }
}
