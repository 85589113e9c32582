import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';

/**
 * Every statement of the webhook module, in one place. Times come from the database clock
 * (`now()`), never from the Node process. Each statement is a SELECT at the top (writes live in
 * CTEs), so the driver returns rows the same way for all of them.
 *
 * Row states of `webhook_delivery`: pending (`delivered_at IS NULL AND dead_at IS NULL`),
 * delivered, dead. A pending row is due when `next_attempt_at <= now()` and its lease, if any,
 * has ended; a claim moves `next_attempt_at` to the end of the lease, so the partial index
 * `webhook_delivery_due_idx (next_attempt_at, id)` finds due rows alone.
 */
const SQL = {
  /**
   * One row per enabled endpoint of the organization subscribed to the type, keyed
   * `<eventId>:<endpointId>`: a redelivered event finds its rows there and inserts nothing.
   * $1 event id, $2 organization id, $3 event type, $4 body (jsonb).
   */
  fanOut: `
    WITH inserted AS (
      INSERT INTO webhook_delivery (id, endpoint_id, event_id, event_type, organization_id, body)
      SELECT $1::text || ':' || e.id::text, e.id, $1::uuid, $3::text, $2::text, $4::jsonb
      FROM webhook_endpoint AS e
      WHERE e.organization_id = $2::uuid
        AND e.enabled
        AND $3::text = ANY (e.event_types)
      ORDER BY e.created_at, e.id
      ON CONFLICT (id) DO NOTHING
      RETURNING id
    )
    SELECT id FROM inserted
  `,

  /**
   * Leases due rows, skipping rows another sender holds; the attempt count is bumped here, so
   * a settle carrying an older count finds nothing to change.
   * $1 limit, $2 lease ms.
   */
  claim: `
    WITH due AS (
      SELECT id
      FROM webhook_delivery
      WHERE delivered_at IS NULL
        AND dead_at IS NULL
        AND next_attempt_at <= now()
        AND (lease_expires_at IS NULL OR lease_expires_at <= now())
      ORDER BY next_attempt_at, id
      LIMIT $1
      FOR UPDATE SKIP LOCKED
    ),
    claimed AS (
      UPDATE webhook_delivery AS d
      SET attempts = d.attempts + 1,
          lease_expires_at = now() + make_interval(secs => $2 / 1000.0),
          next_attempt_at = now() + make_interval(secs => $2 / 1000.0)
      FROM due
      WHERE d.id = due.id
      RETURNING d.id, d.endpoint_id, d.event_type, d.body, d.attempts, d.next_attempt_at
    )
    SELECT c.id, c.endpoint_id, c.event_type, c.body, c.attempts,
           e.url, e.secret, e.enabled
    FROM claimed AS c
    JOIN webhook_endpoint AS e ON e.id = c.endpoint_id
    ORDER BY c.next_attempt_at, c.id
  `,

  /** $1 id, $2 attempts of the claim, $3 HTTP status. */
  markDelivered: `
    WITH settled AS (
      UPDATE webhook_delivery
      SET delivered_at = now(),
          lease_expires_at = NULL,
          last_status = $3,
          last_error = NULL
      WHERE id = $1
        AND attempts = $2
        AND delivered_at IS NULL
        AND dead_at IS NULL
      RETURNING id
    )
    SELECT id FROM settled
  `,

  /**
   * A failed attempt: due again after the backoff, or dead when `$6` says it was the last.
   * $1 id, $2 attempts of the claim, $3 HTTP status or null, $4 scrubbed error, $5 retry ms,
   * $6 dead (boolean).
   */
  markFailed: `
    WITH settled AS (
      UPDATE webhook_delivery
      SET lease_expires_at = NULL,
          last_status = $3,
          last_error = $4,
          next_attempt_at = CASE WHEN $6::boolean THEN next_attempt_at
                                 ELSE now() + make_interval(secs => $5 / 1000.0) END,
          dead_at = CASE WHEN $6::boolean THEN now() END
      WHERE id = $1
        AND attempts = $2
        AND delivered_at IS NULL
        AND dead_at IS NULL
      RETURNING id, dead_at IS NOT NULL AS dead
    )
    SELECT id, dead FROM settled
  `,

  /** Newest first. $1 organization id, $2 limit. */
  list: `
    SELECT id, endpoint_id, event_id, event_type, organization_id, attempts, next_attempt_at,
           delivered_at, dead_at, last_status, last_error, created_at
    FROM webhook_delivery
    WHERE organization_id = $1
    ORDER BY created_at DESC, id DESC
    LIMIT $2
  `,
} as const;

/** A delivery leased by this sender, with what it takes to send it. */
export interface ClaimedDelivery {
  id: string;
  endpointId: string;
  eventType: string;
  body: unknown;
  /** The attempt count this claim holds; settles are guarded by it. */
  attempts: number;
  url: string;
  /** The endpoint's `whsec_...` secret: for signing only, never logged or returned. */
  secret: string;
  enabled: boolean;
}

export interface FailedAttempt {
  id: string;
  attempts: number;
  /** The HTTP status, or null when no response came (timeout, refused connection). */
  status: number | null;
  /** Already scrubbed. */
  error: string;
  retryMs: number;
  dead: boolean;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'dead';

/** A delivery as `GET /webhooks/deliveries` shows it: no body, no secret. */
export interface DeliveryView {
  id: string;
  endpointId: string;
  eventId: string;
  eventType: string;
  organizationId: string | null;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: Date | null;
  deliveredAt: Date | null;
  deadAt: Date | null;
  lastStatus: number | null;
  lastError: string | null;
  createdAt: Date;
}

interface ClaimRow {
  id: string;
  endpoint_id: string;
  event_type: string;
  body: unknown;
  attempts: number;
  url: string;
  secret: string;
  enabled: boolean;
}

interface ListRow {
  id: string;
  endpoint_id: string;
  event_id: string;
  event_type: string;
  organization_id: string | null;
  attempts: number;
  next_attempt_at: Date;
  delivered_at: Date | null;
  dead_at: Date | null;
  last_status: number | null;
  last_error: string | null;
  created_at: Date;
}

/** The only place that speaks SQL to `webhook_delivery`; one round trip per call. */
@Injectable()
export class WebhookDeliveryRepository {
  constructor(private readonly dataSource: DataSource) {}

  /** Inserts the event's missing deliveries in one statement; returns the ids it inserted. */
  async fanOut(input: {
    eventId: string;
    organizationId: string;
    eventType: string;
    body: unknown;
  }): Promise<string[]> {
    const rows = await this.dataSource.query<{ id: string }[]>(SQL.fanOut, [
      input.eventId,
      input.organizationId,
      input.eventType,
      JSON.stringify(input.body),
    ]);
    return rows.map((row) => row.id);
  }

  async claim(limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
    const rows = await this.dataSource.query<ClaimRow[]>(SQL.claim, [limit, leaseMs]);
    return rows.map((row) => ({
      id: row.id,
      endpointId: row.endpoint_id,
      eventType: row.event_type,
      body: row.body,
      attempts: row.attempts,
      url: row.url,
      secret: row.secret,
      enabled: row.enabled,
    }));
  }

  /** False when the claim was stale (the row was claimed again or settled): nothing written. */
  async markDelivered(id: string, attempts: number, status: number): Promise<boolean> {
    const rows = await this.dataSource.query<{ id: string }[]>(SQL.markDelivered, [
      id,
      attempts,
      status,
    ]);
    return rows.length > 0;
  }

  /** `settled` false when the claim was stale: nothing written. */
  async markFailed(attempt: FailedAttempt): Promise<{ settled: boolean; dead: boolean }> {
    const rows = await this.dataSource.query<{ id: string; dead: boolean }[]>(SQL.markFailed, [
      attempt.id,
      attempt.attempts,
      attempt.status,
      attempt.error,
      Math.max(0, Math.round(attempt.retryMs)),
      attempt.dead,
    ]);
    return { settled: rows.length > 0, dead: rows[0]?.dead ?? false };
  }

  async list(organizationId: string, limit: number): Promise<DeliveryView[]> {
    const rows = await this.dataSource.query<ListRow[]>(SQL.list, [organizationId, limit]);
    return rows.map((row) => ({
      id: row.id,
      endpointId: row.endpoint_id,
      eventId: row.event_id,
      eventType: row.event_type,
      organizationId: row.organization_id,
      status: row.delivered_at ? 'delivered' : row.dead_at ? 'dead' : 'pending',
      attempts: row.attempts,
      nextAttemptAt: row.delivered_at || row.dead_at ? null : row.next_attempt_at,
      deliveredAt: row.delivered_at,
      deadAt: row.dead_at,
      lastStatus: row.last_status,
      lastError: row.last_error,
      createdAt: row.created_at,
    }));
  }
}
