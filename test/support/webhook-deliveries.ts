import type { Client } from 'pg';

/**
 * The reference app's webhook deliveries, read from the outbox: one `webhook.delivery` event per
 * (event, endpoint), its tries counted from the `webhook-sender` handler's failures and success.
 */
export interface WebhookDeliveryRow {
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  attempts: number;
  delivered_at: Date | null;
  dead_at: Date | null;
  last_error: string | null;
  lease_expires_at: Date | null;
}

export async function webhookDeliveries(
  sql: Pick<Client, 'query'>,
  filter: { eventId?: string; endpointId?: string } = {},
): Promise<WebhookDeliveryRow[]> {
  const { rows } = await sql.query<WebhookDeliveryRow>(
    `SELECT id, aggregate_id AS endpoint_id, payload ->> 'eventId' AS event_id,
            payload ->> 'eventType' AS event_type,
            coalesce((failures -> 'webhook-sender' ->> 'count')::int, 0)
              + CASE WHEN deliveries ? 'webhook-sender' THEN 1 ELSE 0 END AS attempts,
            dispatched_at AS delivered_at, dead_at, last_error, lease_expires_at
     FROM outbox_event
     WHERE type = 'webhook.delivery'
       AND ($1::text IS NULL OR payload ->> 'eventId' = $1)
       AND ($2::text IS NULL OR aggregate_id = $2)
     ORDER BY occurred_at, id`,
    [filter.eventId ?? null, filter.endpointId ?? null],
  );
  return rows;
}
