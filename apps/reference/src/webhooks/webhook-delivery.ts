import { v5 as uuidv5 } from 'uuid';

/** The outbox event that carries one webhook to one endpoint; `webhook-sender` POSTs it. */
export const WEBHOOK_DELIVERY_EVENT = 'webhook.delivery';
export const WEBHOOK_FANOUT = 'webhook-fanout';
export const WEBHOOK_SENDER = 'webhook-sender';

/**
 * The Standard Webhooks retry schedule: after the first try, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h
 * and 10 h (8 tries in all, about a day and a half). `WEBHOOK_RETRY_SCHEDULE_MS` replaces it.
 */
export const STANDARD_WEBHOOKS_SCHEDULE_MS = [
  5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000,
] as const;

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

/** The payload of a `webhook.delivery` event. */
export interface WebhookDeliveryPayload {
  endpointId: string;
  /** The public event this delivery tells the endpoint about. */
  eventId: string;
  eventType: string;
  body: WebhookBody;
}

/** Namespace of delivery ids (a fixed random UUID): ids are UUIDv5 of `<eventId>:<endpointId>`. */
const DELIVERY_NAMESPACE = '5b0c3f5e-8a47-4f0e-9a43-3d2e3f4a9c61';

/**
 * The delivery event's id, and so its `webhook-id`: the same for the same event and endpoint,
 * so a fan-out run again emits a duplicate the outbox drops rather than a second delivery.
 */
export function deliveryEventId(eventId: string, endpointId: string): string {
  return uuidv5(`${eventId}:${endpointId}`, DELIVERY_NAMESPACE);
}
