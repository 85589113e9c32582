import type { EntityManager } from 'typeorm';
import type { OutboxEvent } from '../outbox-event.types';
import { toEvent, type EventRow } from './event-row.mapping';
import type { OutboxResult } from './outbox.result';
import { ClientStore } from './store.client';
import { WAKE_PAYLOAD } from './wake-payload.sql';

/** Which events a testing helper looks at: every condition given must hold. */
export interface OutboxEventFilter {
  ids?: readonly string[];
  type?: string;
  aggregateType?: string;
  aggregateId?: string;
  correlationId?: string;
}

/** An event as it was emitted, and where its delivery stands (the testing kit's view). */
export interface EmittedOutboxEvent<P = unknown> extends OutboxEvent<P> {
  /** Claims so far. */
  attempts: number;
  /** Handlers that have delivered it. */
  deliveredTo: string[];
  dispatchedAt: Date | null;
  deadAt: Date | null;
}

/**
 * Shared filter of the testing helpers' statements: each condition applies when its value is
 * given. $1 ids, $2 type, $3 aggregate type, $4 aggregate id, $5 correlation id.
 */
const EVENT_FILTER = `
  ($1::uuid[] IS NULL OR id = ANY ($1::uuid[]))
  AND ($2::text IS NULL OR type = $2::text)
  AND ($3::text IS NULL OR aggregate_type = $3::text)
  AND ($4::text IS NULL OR aggregate_id = $4::text)
  AND ($5::text IS NULL OR correlation_id = $5::text)
`;

/**
 * Events as emitted, in emit order, with where their delivery stands: for tests that assert
 * what a service wrote (run in the service's transaction, it sees what has not committed yet).
 * $1–$5 the filter, $6 the most rows returned.
 */
const FIND_EVENTS = `
  SELECT id, type, aggregate_type, aggregate_id, organization_id, request_id, payload, metadata,
         occurred_at, causation_id, correlation_id, ordering_key, attempts, deliveries,
         dispatched_at, dead_at
  FROM outbox_event
  WHERE ${EVENT_FILTER}
  ORDER BY occurred_at, id
  LIMIT $6
`;

/**
 * Travels past backoff: live events that wait for a retry (the event, or one of its handlers, is
 * due later) become due now, and so does each of their handlers still retrying (one that used
 * its attempts stays out). Events already due, in flight, delivered or dead are left alone (a
 * dead event is replayed with `OutboxAdmin.replay`).
 * $1–$5 the filter, $6 the channel to wake.
 */
const MAKE_DUE = `
  WITH due AS (
    UPDATE outbox_event
    SET next_attempt_at = least(next_attempt_at, now()),
        failures = (
          SELECT coalesce(
                   jsonb_object_agg(
                     f.key,
                     CASE WHEN f.value ->> 'retryAt' IS NULL THEN f.value
                          ELSE jsonb_set(f.value, '{retryAt}', to_jsonb(now())) END),
                   '{}'::jsonb)
          FROM jsonb_each(failures) AS f)
    WHERE dispatched_at IS NULL
      AND dead_at IS NULL
      AND lease_expires_at IS NULL
      AND (next_attempt_at > now()
           OR EXISTS (SELECT 1 FROM jsonb_each(failures) AS w
                      WHERE (w.value ->> 'retryAt')::timestamptz > now()))
      AND ${EVENT_FILTER}
    RETURNING id
  ),
  woken AS (
    SELECT pg_notify($6, ${WAKE_PAYLOAD}) FROM (SELECT 1 FROM due LIMIT 1) AS any_due
  )
  SELECT id, (SELECT count(*) FROM woken) AS woken
  FROM due
`;

/** Most events one `findEvents` returns: a test that emits more asks for them by filter. */
const FIND_EVENTS_LIMIT = 1000;

/** $1–$5 of EVENT_FILTER. */
function filterParameters(filter: OutboxEventFilter): unknown[] {
  return [
    filter.ids ? [...filter.ids] : null,
    filter.type ?? null,
    filter.aggregateType ?? null,
    filter.aggregateId ?? null,
    filter.correlationId ?? null,
  ];
}

interface EmittedRow extends EventRow {
  attempts: number;
  deliveries: Record<string, unknown>;
  dispatched_at: Date | null;
  dead_at: Date | null;
}

function toEmitted(rows: EmittedRow[]): EmittedOutboxEvent[] {
  return rows.map((row) => ({
    ...toEvent(row),
    attempts: row.attempts,
    deliveredTo: Object.keys(row.deliveries),
    dispatchedAt: row.dispatched_at,
    deadAt: row.dead_at,
  }));
}

/** The testing kit's store (`emitted`, `expectEmitted`, `makeDue`, `drainUntilIdle`). */
export class TestingStore extends ClientStore {
  /**
   * Events matching `filter`, in emit order (at most `limit`): through `manager`'s transaction
   * when it has one, so what it wrote and has not committed yet is seen.
   */
  async findEvents(
    filter: OutboxEventFilter,
    options: { manager?: EntityManager; limit?: number } = {},
  ): Promise<OutboxResult<EmittedOutboxEvent[]>> {
    const parameters = [...filterParameters(filter), options.limit ?? FIND_EVENTS_LIMIT];
    const manager = options.manager;
    return manager?.queryRunner?.isTransactionActive
      ? this.client.runIn('findEvents', manager, FIND_EVENTS, parameters, toEmitted)
      : this.client.run('findEvents', FIND_EVENTS, parameters, toEmitted);
  }

  /**
   * Makes live events matching `filter` that wait for a retry due now, each retrying handler
   * included, and wakes the running instances. Returns their ids.
   */
  async makeDue(filter: OutboxEventFilter): Promise<OutboxResult<string[]>> {
    return this.client.run(
      'makeDue',
      MAKE_DUE,
      [...filterParameters(filter), this.client.channel],
      (rows: { id: string }[]) => rows.map((row) => row.id),
    );
  }
}
