import { NEVER_DUE } from '../outbox-row.sql';
import type { DeadLetterFilter } from './dead-letter.types';

/**
 * A handler's part of `last_error` (`<handler>: <message>; …`, written by the event's last failed
 * attempt), or the whole error for a row that names no failed handler (`handler` null).
 */
export function handlerMessage(handler: string, lastError: string): string {
  return `CASE WHEN ${handler} IS NULL THEN ${lastError}
              ELSE (SELECT substr(part, length(${handler}) + 3)
                    FROM unnest(string_to_array(${lastError}, '; ')) AS part
                    WHERE starts_with(part, ${handler} || ': ')
                    LIMIT 1)
         END`;
}

/** A message with UUIDs, hex ids and numbers blanked out, hashed: one kind of error. */
export function fingerprintOf(message: string): string {
  return `md5(regexp_replace(coalesce(${message}, ''),
                 '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|0x[0-9a-f]+|\\m[0-9a-f]{8,}\\M|[0-9]+',
                 '#', 'gi'))`;
}

/**
 * The handlers a row failed and has not delivered, as rows `h(key)`; one null key for a row that
 * names none (dead under the event-level rule of an older version).
 */
export function failedHandlersOf(failures: string, deliveries: string): string {
  return `(SELECT k.key FROM jsonb_object_keys(${failures}) AS k(key) WHERE NOT ${deliveries} ? k.key
           UNION ALL
           SELECT NULL WHERE NOT EXISTS (
             SELECT 1 FROM jsonb_object_keys(${failures}) AS k(key) WHERE NOT ${deliveries} ? k.key)
          ) AS h(key)`;
}

/**
 * Dead letters for OutboxAdmin: undelivered events that are dead, and (`$1`) those retrying
 * after a failure. Discarded events are dead ones an operator set aside: left out unless `$10`.
 * Each other condition applies when its value is given: $2 types, $3 a handler that has failed
 * and not delivered, $4 organization, $5 aggregate type, $6 aggregate id, $7 dead (retrying:
 * occurred) at or after, $8 before, $9 text in the last error (case-insensitive), $11 the
 * fingerprint of a group (`GROUP_DEAD_LETTERS`): a failed handler (the one of $3 when given)
 * failed with that kind of error.
 */
export const DEAD_LETTER_FILTER = `
  dispatched_at IS NULL
  AND (dead_at IS NOT NULL OR ($1::boolean AND failures <> '{}'::jsonb))
  AND ($10::boolean OR discarded_at IS NULL)
  AND ($2::text[] IS NULL OR type = ANY ($2::text[]))
  AND ($3::text IS NULL OR (failures ? $3::text AND NOT deliveries ? $3::text))
  AND ($4::text IS NULL OR organization_id = $4::text)
  AND ($5::text IS NULL OR aggregate_type = $5::text)
  AND ($6::text IS NULL OR aggregate_id = $6::text)
  AND ($7::timestamptz IS NULL OR coalesce(dead_at, occurred_at) >= $7::timestamptz)
  AND ($8::timestamptz IS NULL OR coalesce(dead_at, occurred_at) < $8::timestamptz)
  AND ($9::text IS NULL OR strpos(lower(last_error), lower($9::text)) > 0)
  AND ($11::text IS NULL OR EXISTS (
    SELECT 1 FROM ${failedHandlersOf('failures', 'deliveries')}
    WHERE ($3::text IS NULL OR h.key = $3::text)
      AND ${fingerprintOf(handlerMessage('h.key', 'last_error'))} = $11::text))
`;

/** `next_attempt_at`, null for a dead row that waits for a replay (NEVER_DUE). */
export const NEXT_ATTEMPT = `CASE WHEN next_attempt_at < ${NEVER_DUE} THEN next_attempt_at END`;

/** $1–$11 of DEAD_LETTER_FILTER, in its order. */
export function deadLetterParameters(filter: DeadLetterFilter): unknown[] {
  return [
    filter.includeRetrying ?? false,
    filter.types ? [...filter.types] : null,
    filter.handler ?? null,
    filter.organizationId ?? null,
    filter.aggregateType ?? null,
    filter.aggregateId ?? null,
    filter.deadAfter ?? null,
    filter.deadBefore ?? null,
    filter.errorContains ?? null,
    filter.includeDiscarded ?? false,
    filter.fingerprint ?? null,
  ];
}
