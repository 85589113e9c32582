import { TRACE_CONTEXT_KEYS } from '../../outbox.constants';
import type { OutboxRow } from './outbox-event.validator';
import { WAKE_PAYLOAD } from '../wake-payload.sql';

/** Columns an enqueue writes, in the order of its parameters; the rest take their defaults. */
export const ENQUEUE_COLUMNS = [
  'id',
  'type',
  'aggregate_type',
  'aggregate_id',
  'organization_id',
  'request_id',
  'payload',
  'metadata',
  'causation_id',
  'correlation_id',
  'ordering_key',
] as const;

/**
 * `ENQUEUE_COLUMNS` and `partition_key`, for a chunk in which an event names its partition.
 * Other chunks leave the column out, so an app that never names one emits whether or not
 * `OutboxFairClaims1775000000000` has run.
 */
export const ENQUEUE_PARTITIONED_COLUMNS = [...ENQUEUE_COLUMNS, 'partition_key'] as const;

/** Whether any of `rows` names its partition: then the chunk writes `partition_key`. */
export function namesPartition(rows: readonly OutboxRow[]): boolean {
  return rows.some((row) => row.partition_key !== null);
}

/** Rows per enqueue statement, far below PostgreSQL's 65,535 bind parameters. */
export const ENQUEUE_MAX_ROWS = 1000;

const enqueueStatements = new Map<string, string>();

/**
 * Inserts `rows` events and, unless `notify` is false, wakes listeners, in one statement. The
 * NOTIFY is queued on the caller's connection, so it is delivered only if the caller's
 * transaction commits; PostgreSQL folds the identical notifications of one transaction into one.
 * Plain VALUES with the notify in RETURNING (rather than a JSON document expanded in SQL, or a
 * CTE) keeps the emit within about a tenth of a bare INSERT. Without the notify (wakes coalesced,
 * see `WakeCoalescer`) the commit skips PostgreSQL's notify queue, which serialises the commits
 * of concurrent producers, and each row returns the payload its NOTIFY would have carried, for
 * the trailing wake.
 * An id already present inserts nothing and is missing from RETURNING, which is how the
 * caller tells a duplicate from a new event.
 * Parameters: the columns of ENQUEUE_COLUMNS for each row, then the channel (with `notify`).
 */
export function enqueueStatement(rows: number, notify = true, partitioned = false): string {
  const key = `${rows}:${notify}:${partitioned}`;
  let statement = enqueueStatements.get(key);
  if (statement) return statement;
  const columns = partitioned ? ENQUEUE_PARTITIONED_COLUMNS : ENQUEUE_COLUMNS;
  const width = columns.length;
  const values = Array.from({ length: rows }, (_, row) => {
    const first = row * width;
    return `(${columns.map((_, column) => `$${first + column + 1}`).join(', ')})`;
  });
  statement = `
  INSERT INTO outbox_event (${columns.join(', ')})
  VALUES ${values.join(',\n         ')}
  ON CONFLICT (id) DO NOTHING
  RETURNING id, ${notify ? `pg_notify($${rows * width + 1}, ${WAKE_PAYLOAD})` : `${WAKE_PAYLOAD} AS due_from`}
`;
  if (rows <= 16) enqueueStatements.set(key, statement);
  return statement;
}

/**
 * Wakes listeners now, outside any caller's transaction (a coalesced trailing wake). $1 channel,
 * $2 the payload: the earliest due time of the rows it wakes for (see `WAKE_PAYLOAD`), or '' when
 * it is not known.
 */
export const WAKE = `SELECT pg_notify($1, $2::text)`;

/**
 * Of the ids an enqueue found already present, those whose stored event differs from what was
 * emitted under the same id: an id names one event, so these are conflicts, not duplicates.
 * $1 jsonb array of the emitted rows (ENQUEUE_COLUMNS as keys).
 */
export const FIND_CONFLICTING = `
  SELECT e.id, e.type
  FROM jsonb_array_elements($1::jsonb) AS s(doc)
  JOIN outbox_event AS e ON e.id = (s.doc->>'id')::uuid
  -- '->' keeps a JSON null payload as jsonb 'null', as it is stored; a record expansion would
  -- turn it into SQL NULL and call an identical event a conflict.
  -- Trace context in the metadata is where the emit ran, not what the event says: an event
  -- emitted again from a retried request carries another one and is still the same event.
  WHERE (e.type, e.aggregate_type, e.aggregate_id, e.organization_id, e.request_id,
         e.payload, e.metadata - '{${TRACE_CONTEXT_KEYS.join(',')}}'::text[], e.causation_id,
         e.correlation_id, coalesce(e.ordering_key, e.aggregate_type || ':' || e.aggregate_id))
        IS DISTINCT FROM
        (s.doc->>'type', s.doc->>'aggregate_type', s.doc->>'aggregate_id',
         s.doc->>'organization_id', s.doc->>'request_id', s.doc->'payload',
         (s.doc->'metadata') - '{${TRACE_CONTEXT_KEYS.join(',')}}'::text[],
         (s.doc->>'causation_id')::uuid, s.doc->>'correlation_id',
         coalesce(s.doc->>'ordering_key', (s.doc->>'aggregate_type') || ':' || (s.doc->>'aggregate_id')))
`;

/**
 * The columns of ENQUEUE_COLUMNS (ENQUEUE_PARTITIONED_COLUMNS when `partitioned`) for each row,
 * then the channel when `channel` is given.
 */
export function enqueueParameters(
  rows: readonly OutboxRow[],
  channel: string | null,
  partitioned = false,
): unknown[] {
  const parameters = rows.flatMap((row) => [
    row.id,
    row.type,
    row.aggregate_type,
    row.aggregate_id,
    row.organization_id,
    row.request_id,
    JSON.stringify(row.payload),
    JSON.stringify(row.metadata),
    row.causation_id,
    row.correlation_id,
    row.ordering_key,
    ...(partitioned ? [row.partition_key] : []),
  ]);
  if (channel !== null) parameters.push(channel);
  return parameters;
}

/** WAKE: $1 the channel, $2 the earliest due time (epoch ms) it wakes for, when known. */
export function wakeParameters(channel: string, dueFrom: number | null): unknown[] {
  return [channel, dueFrom === null ? '' : String(dueFrom)];
}

/** FIND_CONFLICTING: $1 the rows an enqueue found present, as one JSON document. */
export function conflictParameters(rows: readonly OutboxRow[]): unknown[] {
  return [JSON.stringify(rows)];
}
