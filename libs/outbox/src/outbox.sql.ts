/**
 * Every statement the outbox runs. Each is one statement (the repository wraps its own in a
 * short transaction that sets their timeouts, see `runBounded`); times come from the
 * database clock (`now()`), never from the Node process. Batches travel as one JSON document
 * expanded with `jsonb_to_recordset`, so a statement's shape does not depend on batch size.
 *
 * Row states: live (`dispatched_at IS NULL AND dead_at IS NULL`), dead (`dispatched_at IS NULL
 * AND dead_at IS NOT NULL`) and delivered (`dispatched_at IS NOT NULL`). A row is leased while
 * `lease_expires_at > now()`.
 */

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
] as const;

/** Rows per enqueue statement, far below PostgreSQL's 65,535 bind parameters. */
export const ENQUEUE_MAX_ROWS = 1000;

const enqueueStatements = new Map<number, string>();

/**
 * Inserts `rows` events and wakes listeners, in one statement. The NOTIFY is queued on the
 * caller's connection, so it is delivered only if the caller's transaction commits; PostgreSQL
 * folds the identical notifications of one transaction into one. Plain VALUES with the notify in
 * RETURNING (rather than a JSON document expanded in SQL, or a CTE) keeps the emit within about
 * a tenth of a bare INSERT.
 * An id already present inserts nothing and is missing from RETURNING, which is how the
 * caller tells a duplicate from a new event.
 * Parameters: the columns of ENQUEUE_COLUMNS for each row, then the channel.
 */
export function enqueueStatement(rows: number): string {
  let statement = enqueueStatements.get(rows);
  if (statement) return statement;
  const width = ENQUEUE_COLUMNS.length;
  const values = Array.from({ length: rows }, (_, row) => {
    const first = row * width;
    return `(${ENQUEUE_COLUMNS.map((_, column) => `$${first + column + 1}`).join(', ')})`;
  });
  statement = `
  INSERT INTO outbox_event (${ENQUEUE_COLUMNS.join(', ')})
  VALUES ${values.join(',\n         ')}
  ON CONFLICT (id) DO NOTHING
  RETURNING id, pg_notify($${rows * width + 1}, '')
`;
  if (rows <= 16) enqueueStatements.set(rows, statement);
  return statement;
}

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
  WHERE (e.type, e.aggregate_type, e.aggregate_id, e.organization_id, e.request_id,
         e.payload, e.metadata)
        IS DISTINCT FROM
        (s.doc->>'type', s.doc->>'aggregate_type', s.doc->>'aggregate_id',
         s.doc->>'organization_id', s.doc->>'request_id', s.doc->'payload', s.doc->'metadata')
`;

/**
 * Leases due live rows and due dead rows in one statement. Dead replays have a reserved share
 * of the batch (half of it, rounded down, so a claim of one row never goes to a replay while live
 * work waits); live rows fill the rest in claim order, and dead rows may take what live rows left
 * unused. Rows another relay holds are skipped, not waited for.
 *
 * The repository runs it with `synchronous_commit` off for its transaction only (see
 * `OutboxRepository.claim`).
 * $1 limit, $2 lease ms, $3 dead retry ms, $4 types (text[] or null).
 */
const DUE_DEAD = `
    SELECT id
    FROM outbox_event
    WHERE dispatched_at IS NULL
      AND dead_at IS NOT NULL
      AND dead_at <= now() - make_interval(secs => $3 / 1000.0)
      AND (lease_expires_at IS NULL OR lease_expires_at <= now())
      AND ($4::text[] IS NULL OR type = ANY ($4::text[]))`;

export const CLAIM = `
  WITH reserved_dead AS (${DUE_DEAD}
    ORDER BY dead_at, id
    LIMIT $1::int / 2
    FOR UPDATE SKIP LOCKED
  ),
  due_live AS (
    SELECT id
    FROM outbox_event
    WHERE dispatched_at IS NULL
      AND dead_at IS NULL
      AND next_attempt_at <= now()
      AND (lease_expires_at IS NULL OR lease_expires_at <= now())
      AND ($4::text[] IS NULL OR type = ANY ($4::text[]))
    ORDER BY occurred_at, id
    LIMIT (SELECT $1::int - count(*) FROM reserved_dead)
    FOR UPDATE SKIP LOCKED
  ),
  spare_dead AS (${DUE_DEAD}
      AND id NOT IN (SELECT id FROM reserved_dead)
    ORDER BY dead_at, id
    LIMIT (SELECT $1::int - count(*) FROM (SELECT id FROM reserved_dead
                                            UNION ALL SELECT id FROM due_live) AS taken)
    FOR UPDATE SKIP LOCKED
  ),
  claimed AS (
    UPDATE outbox_event AS e
    SET attempts = e.attempts + 1,
        lease_expires_at = now() + make_interval(secs => $2 / 1000.0)
    -- An id array rather than a join, so the update reaches its rows through the primary key
    -- instead of a hash join over the whole table.
    WHERE e.id = ANY (ARRAY(SELECT id FROM reserved_dead
                            UNION ALL SELECT id FROM due_live
                            UNION ALL SELECT id FROM spare_dead))
    RETURNING e.id, e.type, e.aggregate_type, e.aggregate_id, e.organization_id, e.request_id,
              e.payload, e.metadata, e.occurred_at, e.attempts, e.lease_expires_at,
              e.deliveries, e.dead_at, e.last_error
  )
  SELECT claimed.*
  FROM claimed
  ORDER BY occurred_at, id
`;

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
 * $1 jsonb array of {id, attempts, handlers}, $2 uuid[] of the same ids.
 */
export const MARK_DELIVERED = `
  UPDATE outbox_event AS e
  SET dispatched_at = now(),
      lease_expires_at = NULL,
      last_error = NULL,
      deliveries = ${MERGED_DELIVERIES}
  FROM jsonb_to_recordset($1::jsonb) AS s(id uuid, attempts integer, handlers text[])
  WHERE e.id = ANY ($2::uuid[])
    AND e.id = s.id
    AND e.attempts = s.attempts
    AND e.dispatched_at IS NULL
  RETURNING e.id
`;

/**
 * Records a failed attempt, each row only if it still holds the attempt it was claimed with.
 * A live row below the limit is scheduled again; at the limit it becomes dead and, in the same
 * statement, one `outbox.event.dead` event is inserted (never for a dead announcement itself,
 * which would otherwise announce its own death forever). A dead row that fails on replay stays
 * dead with a new dead time and announces nothing.
 * $1 jsonb array of {id, attempts, handlers, failed_handlers, error, retry_ms, dead_event_id},
 * $2 max attempts, $3 channel, $4 dead event type, $5 dead event aggregate type, $6 uuid[] of
 * the ids (so rows are found through the primary key).
 */
export const MARK_FAILED = `
  WITH input AS (
    SELECT *
    FROM jsonb_to_recordset($1::jsonb) AS s(
      id uuid, attempts integer, handlers text[], failed_handlers text[],
      error text, retry_ms double precision, dead_event_id uuid)
  ),
  current AS (
    SELECT e.id, e.dead_at IS NULL AND s.attempts >= $2 AS becomes_dead
    FROM outbox_event AS e
    JOIN input AS s ON s.id = e.id
    WHERE e.id = ANY ($6::uuid[])
      AND e.attempts = s.attempts
      AND e.dispatched_at IS NULL
    FOR UPDATE OF e
  ),
  settled AS (
    UPDATE outbox_event AS e
    SET lease_expires_at = NULL,
        last_error = s.error,
        deliveries = ${MERGED_DELIVERIES},
        next_attempt_at = CASE
          WHEN e.dead_at IS NULL AND NOT c.becomes_dead
            THEN now() + make_interval(secs => s.retry_ms / 1000.0)
          ELSE e.next_attempt_at
        END,
        dead_at = CASE
          WHEN e.dead_at IS NOT NULL OR c.becomes_dead THEN now()
        END
    FROM input AS s, current AS c
    WHERE e.id = ANY ($6::uuid[])
      AND e.id = s.id
      AND c.id = s.id
      AND e.attempts = s.attempts
    RETURNING e.id, e.type, e.aggregate_type, e.aggregate_id, e.organization_id,
              e.request_id, e.attempts, e.last_error, c.becomes_dead,
              s.failed_handlers, s.dead_event_id
  ),
  announced AS (
    INSERT INTO outbox_event
      (id, type, aggregate_type, aggregate_id, organization_id, request_id, payload)
    SELECT dead_event_id, $4, $5, id::text, organization_id, request_id,
           jsonb_build_object(
             'eventId', id,
             'type', type,
             'aggregateType', aggregate_type,
             'aggregateId', aggregate_id,
             'attempts', attempts,
             'failedHandlers', to_jsonb(coalesce(failed_handlers, '{}'::text[])),
             'lastError', last_error)
    FROM settled
    WHERE becomes_dead
      AND type <> $4
    ON CONFLICT (id) DO NOTHING
    RETURNING id
  ),
  woken AS (
    SELECT pg_notify($3, '') FROM (SELECT 1 FROM announced LIMIT 1) AS any_announced
  )
  SELECT id, becomes_dead, (SELECT count(*) FROM woken) AS woken
  FROM settled
`;

/**
 * Counts and timings for the dispatcher's next wake and for health reports. A live row is due
 * (ready to claim), retrying (resting until its next attempt), in flight (under a lease) or
 * overdue (its lease ended without a settle: a relay crashed or stalled; claimable again). Lag is
 * how long the oldest claimable live row has waited since it became claimable, so rows resting
 * in backoff never count as lag.
 * $1 dead retry ms, $2 types (text[] or null).
 */
export const PENDING_STATE = `
  WITH unsettled AS (
    SELECT dead_at, lease_expires_at, next_attempt_at,
           CASE
             WHEN dead_at IS NULL THEN greatest(next_attempt_at, lease_expires_at)
             ELSE greatest(dead_at + make_interval(secs => $1 / 1000.0), lease_expires_at)
           END AS due_at
    FROM outbox_event
    WHERE dispatched_at IS NULL
      AND ($2::text[] IS NULL OR type = ANY ($2::text[]))
  )
  SELECT
    count(*) FILTER (WHERE dead_at IS NULL AND lease_expires_at IS NULL
                       AND next_attempt_at <= now())::int AS due,
    count(*) FILTER (WHERE dead_at IS NULL AND lease_expires_at IS NULL
                       AND next_attempt_at > now())::int AS retrying,
    count(*) FILTER (WHERE dead_at IS NULL AND lease_expires_at > now())::int AS in_flight,
    count(*) FILTER (WHERE dead_at IS NULL AND lease_expires_at <= now())::int AS overdue,
    count(*) FILTER (WHERE dead_at IS NOT NULL)::int AS dead,
    CASE WHEN count(*) > 0
      THEN greatest(0, extract(epoch FROM min(due_at) - now()) * 1000)::float8
    END AS next_due_in_ms,
    (extract(epoch FROM now() - min(due_at) FILTER (WHERE dead_at IS NULL AND due_at <= now()))
      * 1000)::float8 AS oldest_due_wait_ms
  FROM unsettled
`;

/**
 * Deletes one batch of delivered rows past the retention. Live and dead rows are never
 * candidates, and rows locked by anyone are skipped rather than waited for.
 * $1 retention ms, $2 batch size.
 */
export const SWEEP_BATCH = `
  WITH expired AS (
    SELECT id
    FROM outbox_event
    WHERE dispatched_at < now() - make_interval(secs => $1 / 1000.0)
    ORDER BY dispatched_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
  ),
  deleted AS (
    DELETE FROM outbox_event AS e
    USING expired
    WHERE e.id = expired.id
    RETURNING 1
  )
  SELECT count(*)::int AS deleted FROM deleted
`;

/**
 * Gives back claimed rows whose handlers never started (the dispatcher is stopping): the lease
 * ends now and the attempt that never ran is not counted. Idle peers planned their next wake for
 * when the lease would have ended, so the release wakes them, as an enqueue does.
 * $1 jsonb array of {id, attempts}, $2 uuid[] of the same ids, $3 channel.
 */
export const RELEASE = `
  WITH released AS (
    UPDATE outbox_event AS e
    SET lease_expires_at = NULL,
        attempts = e.attempts - 1
    FROM jsonb_to_recordset($1::jsonb) AS s(id uuid, attempts integer)
    WHERE e.id = ANY ($2::uuid[])
      AND e.id = s.id
      AND e.attempts = s.attempts
      AND e.dispatched_at IS NULL
    RETURNING e.id
  ),
  woken AS (
    SELECT pg_notify($3, '') FROM (SELECT 1 FROM released LIMIT 1) AS any_released
  )
  SELECT id, (SELECT count(*) FROM woken) AS woken
  FROM released
`;
