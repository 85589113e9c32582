import { v7 as uuidv7 } from 'uuid';
import { OUTBOX_EVENT_AGGREGATE, OUTBOX_EVENT_DEAD } from '../../outbox.constants';
import { scrubError } from '../../common/scrub-error.util';
import { deliveredAt, NEVER_DUE, retryTimesCleared } from '../outbox-row.sql';
import { WAKE_PAYLOAD } from '../wake-payload.sql';
import type {
  DeliveredSettle,
  FailedSettle,
  LimitedSettle,
  MarkFailedOptions,
} from './lease.types';

/**
 * Handler names of a settle become `{name: now()}`; existing entries win, so a delivery time
 * once written never moves and a settle can only add handlers.
 */
const MERGED_DELIVERIES = `
  (SELECT coalesce(jsonb_object_agg(handler, now()), '{}'::jsonb)
   FROM unnest(s.handlers) AS handler) || e.deliveries
`;

/**
 * Marks claimed rows delivered, each only if it still holds the attempt it was claimed with.
 * The ids also travel as an array so the rows are found through the primary key.
 * Parameters: see `markDeliveredParameters`.
 */
export const MARK_DELIVERED = `
  UPDATE outbox_event AS e
  SET ${deliveredAt('now()')},
      deliveries = ${MERGED_DELIVERIES}
  FROM jsonb_to_recordset($1::jsonb) AS s(id uuid, attempts integer, handlers text[])
  WHERE e.id = ANY ($2::uuid[])
    AND e.id = s.id
    AND e.attempts = s.attempts
    AND e.dispatched_at IS NULL
  RETURNING e.id
`;

/**
 * Settles attempts whose limited handlers were held back by their limit (see `LimitedSettle`):
 * the handlers that ran are recorded delivered, the lease ends, the event is due again when its
 * limit has room, and the attempt is given back, as neither a failure nor an attempt. `failures`
 * is not touched. A row is written only under the very claim that ran it: its attempt count
 * and its lease end (known to the millisecond), so a settle retried after its first try
 * committed unseen, and the row was claimed again since, is stale rather than applied to the
 * new claim. Parameters: see `markLimitedParameters`.
 */
export const MARK_LIMITED = `
  UPDATE outbox_event AS e
  SET lease_expires_at = NULL,
      attempts = e.attempts - 1,
      deliveries = ${MERGED_DELIVERIES},
      next_attempt_at = s.due_at
  FROM jsonb_to_recordset($1::jsonb) AS s(
    id uuid, attempts integer, handlers text[], due_at timestamptz, lease_ms double precision)
  WHERE e.id = ANY ($2::uuid[])
    AND e.id = s.id
    AND e.attempts = s.attempts
    AND e.dispatched_at IS NULL
    AND e.lease_expires_at >= to_timestamp(s.lease_ms / 1000.0)
    AND e.lease_expires_at < to_timestamp((s.lease_ms + 1) / 1000.0)
  RETURNING e.id, e.next_attempt_at AS retry_at
`;

/**
 * Records a failed attempt, each row only if it still holds the attempt it was claimed with.
 *
 * Each failed handler's entry in `failures` becomes `{count, retryAt}` (`retryAt` null once the
 * handler has used its attempts). A live row that stays live is due again at the earliest
 * `retryAt` of its `pending` handlers (those still retrying), or `retry ms` ahead when none has
 * one. A row whose settle says `dead` (every handler left has used its attempts) becomes dead
 * and, in the same statement, one `outbox.event.dead` event is inserted (never for a dead
 * announcement itself, which would otherwise announce its own death forever). A dead row that
 * fails on replay stays dead with a new dead time and announces nothing. Either way a dead row's
 * next replay is written now, its type's dead retry ms ahead, so replays are found
 * in due order like live rows; a negative dead retry means none (NEVER_DUE), and every retry time of
 * a dead row is cleared (a replay of chosen handlers marked them, see REPLAY_SELECTED). Whether
 * the event is dead is the executor's decision (`dead`); the statement only records it.
 * A row without a lease has already been settled (or given back) for this attempt: a settle
 * retried after its first try committed is stale rather than applied twice. A settle may carry
 * no failure at all (its handlers that ran succeeded, others still wait for their retry): the
 * last error is then kept.
 * Parameters: see `markFailedParameters`.
 */
export const MARK_FAILED = `
  WITH input AS (
    SELECT *
    FROM jsonb_to_recordset($1::jsonb) AS s(
      id uuid, attempts integer, handlers text[], failed_handlers text[],
      error text, retry_ms double precision, dead_event_id uuid, dead boolean,
      failures jsonb, pending text[], limit_room_at timestamptz)
  ),
  current AS (
    SELECT e.id,
           -- Not for handlers the row already records as delivered (a transactional handler
           -- whose commit landed as its budget ran out): such a row is not dead for them.
           e.dead_at IS NULL AND s.dead
             AND EXISTS (SELECT 1 FROM unnest(s.failed_handlers) AS handler
                         WHERE NOT e.deliveries ? handler) AS becomes_dead,
           e.failures || coalesce(
             (SELECT jsonb_object_agg(f.handler, jsonb_build_object(
                       'count', f.count,
                       'retryAt', now() + make_interval(secs => f.delay_ms / 1000.0)))
              FROM jsonb_to_recordset(s.failures) AS f(handler text, count integer,
                                                       delay_ms double precision)
              WHERE NOT e.deliveries ? f.handler),
             '{}'::jsonb) AS failures
    FROM outbox_event AS e
    JOIN input AS s ON s.id = e.id
    WHERE e.id = ANY ($5::uuid[])
      AND e.attempts = s.attempts
      AND e.dispatched_at IS NULL
      AND e.lease_expires_at IS NOT NULL
    FOR UPDATE OF e
  ),
  settled AS (
    UPDATE outbox_event AS e
    SET lease_expires_at = NULL,
        last_error = coalesce(s.error, e.last_error),
        deliveries = ${MERGED_DELIVERIES},
        failures = CASE
          WHEN e.dead_at IS NULL AND NOT c.becomes_dead THEN c.failures
          ELSE ${retryTimesCleared('c.failures')}
        END,
        next_attempt_at = CASE
          WHEN e.dead_at IS NULL AND NOT c.becomes_dead
            -- A handler held by its limit has no retry time: the event is due for it when the
            -- limit has room, if that comes before every retry (least ignores a null).
            THEN least(coalesce(
              (SELECT min((c.failures -> handler ->> 'retryAt')::timestamptz)
               FROM unnest(s.pending) AS handler),
              now() + make_interval(secs => s.retry_ms / 1000.0)), s.limit_room_at)
          ELSE (SELECT CASE WHEN ms >= 0 THEN now() + make_interval(secs => ms / 1000.0)
                            ELSE ${NEVER_DUE} END
                FROM coalesce(($6::jsonb ->> e.type)::float8, $7::float8) AS ms)
        END,
        dead_at = CASE
          WHEN e.dead_at IS NOT NULL OR c.becomes_dead THEN now()
        END
    FROM input AS s, current AS c
    WHERE e.id = ANY ($5::uuid[])
      AND e.id = s.id
      AND c.id = s.id
      AND e.attempts = s.attempts
    RETURNING e.id, e.type, e.aggregate_type, e.aggregate_id, e.organization_id,
              e.request_id, e.correlation_id, e.attempts, e.last_error, c.becomes_dead,
              s.failed_handlers, s.dead_event_id,
              CASE WHEN e.dead_at IS NULL THEN e.next_attempt_at END AS retry_at
  ),
  announced AS (
    INSERT INTO outbox_event
      (id, type, aggregate_type, aggregate_id, organization_id, request_id, payload,
       causation_id, correlation_id)
    SELECT dead_event_id, $3, $4, id::text, organization_id, request_id,
           jsonb_build_object(
             'eventId', id,
             'type', type,
             'aggregateType', aggregate_type,
             'aggregateId', aggregate_id,
             'attempts', attempts,
             'failedHandlers', to_jsonb(coalesce(failed_handlers, '{}'::text[])),
             'lastError', last_error),
           -- The announcement follows from the dead event and belongs to its chain.
           id, coalesce(correlation_id, id::text)
    FROM settled
    WHERE becomes_dead
      AND type <> $3
    ON CONFLICT (id) DO NOTHING
    RETURNING id
  ),
  woken AS (
    SELECT pg_notify($2, ${WAKE_PAYLOAD}) FROM (SELECT 1 FROM announced LIMIT 1) AS any_announced
  )
  SELECT id, becomes_dead, retry_at, (SELECT count(*) FROM woken) AS woken
  FROM settled
`;

/** $1 jsonb array of {id, attempts, handlers}, $2 uuid[] of the same ids. */
/** $1 jsonb array of {id, attempts, handlers, due_at, lease_ms}, $2 uuid[] of the same ids. */
export function markLimitedParameters(settles: readonly LimitedSettle[]): unknown[] {
  const input = settles.map((s) => ({
    id: s.id,
    attempts: s.attempts,
    handlers: s.handlers,
    due_at: s.dueAt.toISOString(),
    lease_ms: s.leaseExpiresAt.getTime(),
  }));
  return [JSON.stringify(input), input.map((s) => s.id)];
}

export function markDeliveredParameters(settles: readonly DeliveredSettle[]): unknown[] {
  const input = settles.map((s) => ({ id: s.id, attempts: s.attempts, handlers: s.handlers }));
  return [JSON.stringify(input), input.map((s) => s.id)];
}

/**
 * $1 jsonb array of {id, attempts, handlers, failed_handlers, error, retry_ms, dead_event_id,
 * dead, failures: [{handler, count, delay_ms}], pending}, $2 channel, $3 dead event type, $4 dead
 * event aggregate type, $5 uuid[] of the ids (so rows are found through the primary key), $6
 * jsonb object of dead retry ms by type, $7 dead retry ms of other types.
 */
export function markFailedParameters(
  settles: readonly FailedSettle[],
  options: MarkFailedOptions,
  channel: string,
): unknown[] {
  const input = settles.map((s) => ({
    id: s.id,
    attempts: s.attempts,
    handlers: s.handlers,
    failed_handlers: s.failedHandlers,
    error: s.error === null ? null : scrubError(s.error),
    retry_ms: Math.max(0, s.retryDelayMs),
    dead_event_id: uuidv7(),
    dead: s.dead,
    failures: s.failures.map((f) => ({
      handler: f.handler,
      count: f.count,
      delay_ms: f.delayMs === null ? null : Math.max(0, f.delayMs),
    })),
    pending: s.pending,
    limit_room_at: s.limitRoomAt?.toISOString() ?? null,
  }));
  const byType = Object.entries(options.deadRetryByType ?? {}).map(([type, ms]) => [
    type,
    deadRetryParameter(ms),
  ]);
  return [
    JSON.stringify(input),
    channel,
    OUTBOX_EVENT_DEAD,
    OUTBOX_EVENT_AGGREGATE,
    input.map((s) => s.id),
    JSON.stringify(Object.fromEntries(byType)),
    deadRetryParameter(options.deadRetryMs),
  ];
}

/** A dead retry as MARK_FAILED takes it: -1 for none (Infinity), else at least 0. */
function deadRetryParameter(ms: number): number {
  return ms === Infinity ? -1 : Math.max(0, ms);
}
