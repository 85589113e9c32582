import { v7 as uuidv7 } from 'uuid';
import {
  OUTBOX_EVENT_AGGREGATE,
  OUTBOX_EVENT_DISCARDED,
  OUTBOX_EVENT_REPLAYED,
} from '../../outbox.constants';
import { NEVER_DUE, retryTimesCleared } from '../outbox-row.sql';
import { WAKE_PAYLOAD } from '../wake-payload.sql';
import { DEAD_LETTER_FILTER, deadLetterParameters } from './dead-letter-filter.sql';
import type { DeadLetterFilter } from './dead-letter.types';

/** One batch of a change, as the admin store runs it. */
export interface DeadLetterChangeBatch {
  change: { kind: 'replay'; handlers?: readonly string[] } | { kind: 'discard'; reason: string };
  filter: DeadLetterFilter;
  ids: readonly string[] | null;
  /** Keyset: only ids after this one. */
  afterId: string;
  limit: number;
  dryRun: boolean;
  actor?: string;
}

/**
 * The rows of one batch of an admin change: those the dead-letter filter ($1–$11) and the ids
 * ($12, uuid[] or null) select, past $13 (keyset by id), at most $14, that `extra` allows. None
 * under a lease in flight (a claim is running their handlers); an expired lease (its relay died)
 * does not protect a row. Locked, so the update sees what was selected.
 */
function adminBatch(extra: string): string {
  return `
  picked AS (
    SELECT id, type
    FROM outbox_event
    WHERE ${DEAD_LETTER_FILTER}
      AND ($12::uuid[] IS NULL OR id = ANY ($12::uuid[]))
      AND id > $13::uuid
      AND (lease_expires_at IS NULL OR lease_expires_at <= now())
      AND ${extra}
    ORDER BY id
    LIMIT $14
    FOR UPDATE
  )`;
}

/**
 * Records each changed row as an event of type $16 (payload: the row's identity and
 * `extraPayload`), in the same statement, so audit handlers see every admin change; ids come
 * from $17 (uuid[], one per row of the batch, in id order). Wakes the running instances ($18 channel).
 */
function recordChanges(changed: string, extraPayload: string): string {
  return `
  recorded AS (
    INSERT INTO outbox_event
      (id, type, aggregate_type, aggregate_id, organization_id, request_id, payload,
       causation_id, correlation_id)
    SELECT ($17::uuid[])[row_number() OVER (ORDER BY id)], $16::text, '${OUTBOX_EVENT_AGGREGATE}',
           id::text, organization_id, request_id,
           jsonb_build_object('eventId', id, 'type', type, 'aggregateType', aggregate_type,
                              'aggregateId', aggregate_id, ${extraPayload}),
           id, coalesce(correlation_id, id::text)
    FROM ${changed}
    RETURNING id
  ),
  woken AS (
    SELECT pg_notify($18, ${WAKE_PAYLOAD}) FROM (SELECT 1 FROM recorded LIMIT 1) AS any_recorded
  )
  SELECT p.id, p.type, c.id IS NOT NULL AS changed, (SELECT count(*) FROM woken) AS woken
  FROM picked AS p
  LEFT JOIN ${changed} AS c USING (id)
  ORDER BY p.id
`;
}

/** The end of a change's UPDATE: the rows picked unless a dry run ($15), and what is recorded. */
const ON_PICKED = `
    FROM picked
    WHERE e.id = picked.id
      AND NOT $15::boolean
    RETURNING e.id, e.type, e.aggregate_type, e.aggregate_id, e.organization_id, e.request_id,
              e.correlation_id`;

/**
 * Replays dead events now (discarded ones too, which are restored): the next claim runs their
 * handlers not yet delivered, or only those of $20 (text[] or null) when given. Named handlers
 * are marked with a retry time of now (the claim of a dead row runs the marked handlers when
 * any is marked, see `OutboxExecutor`); every other mark is cleared. Only handlers that have
 * failed the event and not delivered it can be named: an event none of whose named handlers is
 * such a handler is not selected. Parameters: see `changeParameters`.
 */
export const REPLAY_SELECTED = `
  WITH ${adminBatch(`dead_at IS NOT NULL
      AND ($20::text[] IS NULL OR EXISTS (
        SELECT 1 FROM unnest($20::text[]) AS h(name)
        WHERE failures ? h.name AND NOT deliveries ? h.name))`)},
  replayed AS (
    UPDATE outbox_event AS e
    SET next_attempt_at = now(),
        -- A lease that ran out ends here: its relay's late settle is then stale, and cannot
        -- undo the replay.
        lease_expires_at = NULL,
        discarded_at = NULL,
        discard_reason = NULL,
        failures = ${retryTimesCleared('e.failures')} || coalesce(
          (SELECT jsonb_object_agg(h.name, coalesce(e.failures -> h.name, '{"count": 0}'::jsonb)
                                           || jsonb_build_object('retryAt', now()))
           FROM unnest($20::text[]) AS h(name)
           WHERE e.failures ? h.name AND NOT e.deliveries ? h.name),
          '{}'::jsonb)
${ON_PICKED}
  ),
  ${recordChanges('replayed', `'handlers', $19::jsonb -> 'handlers', 'actor', $19::jsonb -> 'actor'`)}`;

/**
 * Discards events: they stop being replayed, stay visible (listed with `includeDiscarded`) with
 * the time and the reason, and are deleted by the retention sweep later. A retrying event (when
 * the filter includes them) becomes dead as it is discarded; a lease that expired is ended, so
 * its relay's late failure is stale (a late success still marks it delivered, which it then is).
 * Parameters: see `changeParameters`.
 */
export const DISCARD_SELECTED = `
  WITH ${adminBatch(`discarded_at IS NULL`)},
  discarded AS (
    UPDATE outbox_event AS e
    SET discarded_at = now(),
        discard_reason = $19::jsonb ->> 'reason',
        dead_at = coalesce(e.dead_at, now()),
        -- Never due: a relay of the previous version, which knows no discard, never claims it.
        next_attempt_at = ${NEVER_DUE},
        lease_expires_at = NULL
${ON_PICKED}
  ),
  ${recordChanges('discarded', `'reason', $19::jsonb -> 'reason', 'actor', $19::jsonb -> 'actor'`)}`;

/**
 * $1–$11 the dead-letter filter, $12 the ids (uuid[] or null), $13 the keyset (only ids after
 * it), $14 the batch size, $15 dry run, $16 the recorded event's type, $17 its ids (uuid[], one
 * per row of the batch), $18 the channel, $19 jsonb of the recorded payload's own fields
 * (`handlers` or `reason`, and `actor`); a replay's $20 the handlers to rerun (text[] or null).
 */
export function changeParameters(batch: DeadLetterChangeBatch, channel: string): unknown[] {
  const { change } = batch;
  const shared = [
    ...deadLetterParameters(batch.filter),
    batch.ids ? [...batch.ids] : null,
    batch.afterId,
    batch.limit,
    batch.dryRun,
    change.kind === 'replay' ? OUTBOX_EVENT_REPLAYED : OUTBOX_EVENT_DISCARDED,
    Array.from({ length: batch.limit }, () => uuidv7()),
    channel,
  ];
  const actor = batch.actor ?? null;
  return change.kind === 'replay'
    ? [
        ...shared,
        JSON.stringify({ handlers: change.handlers ?? null, actor }),
        change.handlers ? [...change.handlers] : null,
      ]
    : [...shared, JSON.stringify({ reason: change.reason, actor })];
}
