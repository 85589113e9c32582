import { toEvent, type DeliveryStateRow, type EventRow } from '../event-row.mapping';
import { NEXT_ATTEMPT } from './dead-letter-filter.sql';
import type { OutboxEventDetail, OutboxEventState } from './event.types';

/**
 * An event's `OutboxEventState`, by the database clock: delivered, discarded and dead first
 * (a dead event stays dead while a replay runs it), then a live event under a lease is in
 * flight, one with a failure recorded is retrying, and any other is pending.
 */
export const EVENT_STATE = `
  CASE WHEN dispatched_at IS NOT NULL THEN 'delivered'
       WHEN discarded_at IS NOT NULL THEN 'discarded'
       WHEN dead_at IS NOT NULL THEN 'dead'
       WHEN lease_expires_at > now() THEN 'in-flight'
       WHEN failures <> '{}'::jsonb THEN 'retrying'
       ELSE 'pending'
  END`;

/** The columns of one event whole, as `toDetail` maps them. */
export const EVENT_DETAIL_COLUMNS = `
  id, type, aggregate_type, aggregate_id, organization_id, request_id, payload, metadata,
  occurred_at, causation_id, correlation_id, ordering_key, attempts, deliveries, failures,
  last_error,
  lease_expires_at,
  CASE WHEN dispatched_at IS NULL AND discarded_at IS NULL THEN ${NEXT_ATTEMPT} END
    AS next_attempt_at,
  dispatched_at, dead_at, discarded_at, discard_reason, ${EVENT_STATE} AS state`;

/** One event whole, whatever its state. $1 id. */
export const FIND_EVENT = `
  SELECT ${EVENT_DETAIL_COLUMNS}
  FROM outbox_event
  WHERE id = $1::uuid
`;

/** FIND_EVENT: $1 the event's id. */
export function findEventParameters(id: string): unknown[] {
  return [id];
}

export interface DetailRow extends EventRow, DeliveryStateRow {
  state: OutboxEventState;
  lease_expires_at: Date | null;
  next_attempt_at: Date | null;
  dispatched_at: Date | null;
  discarded_at: Date | null;
  discard_reason: string | null;
}

export function toEventDetail(row: DetailRow): OutboxEventDetail {
  return {
    ...toEvent(row),
    state: row.state,
    attempts: row.attempts,
    deliveries: row.deliveries,
    failures: row.failures,
    lastError: row.last_error,
    leaseExpiresAt: row.lease_expires_at,
    nextAttemptAt: row.next_attempt_at,
    dispatchedAt: row.dispatched_at,
    deadAt: row.dead_at,
    discardedAt: row.discarded_at,
    discardReason: row.discard_reason,
  };
}

export function toDetail([row]: DetailRow[]): OutboxEventDetail | null {
  return row ? toEventDetail(row) : null;
}
