import { Injectable } from '@nestjs/common';
import { isUUID } from 'class-validator';
import { OnOutboxEvent, type OutboxEvent, type TransactionalHandlerContext } from '@app/outbox';
import { PUBLIC_EVENT_TYPES } from '../events/event-catalog';
import {
  deliveryEventId,
  WEBHOOK_DELIVERY_EVENT,
  WEBHOOK_FANOUT,
  type WebhookBody,
  type WebhookDeliveryPayload,
} from './webhook-delivery';
import { WebhookEndpoints } from './webhook-endpoints';

/**
 * Turns each public event into one `webhook.delivery` outbox event per enabled, subscribed
 * endpoint of its organization, emitted in the handler's transaction (`ctx.emit`): the
 * deliveries exist exactly when the fan-out counts as done. The POSTs are `webhook-sender`'s,
 * one outbox event each, so a slow or failing endpoint holds neither this event nor another
 * endpoint, and each delivery has its own retries and dead state.
 */
@Injectable()
export class WebhookFanout {
  constructor(private readonly endpoints: WebhookEndpoints) {}

  @OnOutboxEvent(WEBHOOK_FANOUT, { events: PUBLIC_EVENT_TYPES, transaction: true })
  async handle(
    event: OutboxEvent<Record<string, unknown>>,
    ctx: TransactionalHandlerContext,
  ): Promise<void> {
    const organizationId = event.organizationId;
    // Endpoints belong to organizations (uuid); an event without one has nobody to tell.
    if (!organizationId || !isUUID(organizationId)) return;
    const endpoints = await this.endpoints.subscribed(ctx.manager, organizationId, event.type);
    if (endpoints.length === 0) return;
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
    await ctx.emit(
      endpoints.map((endpoint) => ({
        id: deliveryEventId(event.id, endpoint.id),
        type: WEBHOOK_DELIVERY_EVENT,
        aggregateType: 'webhook_endpoint',
        aggregateId: endpoint.id,
        payload: {
          endpointId: endpoint.id,
          eventId: event.id,
          eventType: event.type,
          body,
        } satisfies WebhookDeliveryPayload,
      })),
    );
  }
}
