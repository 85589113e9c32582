import { OUTBOX_EVENT_AGGREGATE, TRACE_CONTEXT_KEYS } from '../outbox.constants';

/** The due time of a row that only an operator's replay makes due again. */
export const NEVER_DUE = `timestamptz '9999-12-31 00:00:00+00'`;

/**
 * Every statement the outbox runs. Each is one statement (the repository wraps its own in a
 * short transaction that sets their timeouts, see `runBounded`); times come from the
 * database clock (`now()`), never from the Node process. Batches travel as one JSON document
 * expanded with `jsonb_to_recordset`, so a statement's shape does not depend on batch size.
 *
 * Row states: live (`dispatched_at IS NULL AND dead_at IS NULL`), dead (`dispatched_at IS NULL
 * AND dead_at IS NOT NULL`) and delivered (`dispatched_at IS NOT NULL`). A row is leased while
 * `lease_expires_at > now()`.
 *
 * `next_attempt_at` is when an unsettled row is next claimable, whatever its state: `now()` for a
 * new row, the lease end once claimed (so a lease that runs out without a settle makes the row
 * due again at that moment), the retry time after a failure, the replay time of a dead row, and
 * `now()` again when a claim is given back. Claims and plans therefore read one ordered range of
 * a partial index (`outbox_event_due_idx` for live rows, `outbox_event_dead_retry_idx` for dead
 * ones) and stop at `now()`, however many rows rest in backoff or under a lease beyond it. A dead
 * row whose automatic replays are off (`deadRetryMs` 0), and a discarded row, are due at
 * NEVER_DUE: only `OutboxAdmin.replay` brings them back. A far date rather than 'infinity', which
 * PostgreSQL before 17 cannot subtract from: the previous version's plans do exactly that.
 *
 * A discarded row (`discarded_at` set, by `OutboxAdmin.discard`) is dead and left out of every
 * claim, count and plan; only listings and the retention sweep see it.
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
  'causation_id',
  'correlation_id',
] as const;

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
 * of concurrent producers.
 * An id already present inserts nothing and is missing from RETURNING, which is how the
 * caller tells a duplicate from a new event.
 * Parameters: the columns of ENQUEUE_COLUMNS for each row, then the channel (with `notify`).
 */
export function enqueueStatement(rows: number, notify = true): string {
  const key = `${rows}:${notify}`;
  let statement = enqueueStatements.get(key);
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
  RETURNING id${notify ? `, pg_notify($${rows * width + 1}, '')` : ''}
`;
  if (rows <= 16) enqueueStatements.set(key, statement);
  return statement;
}

/** Wakes listeners now, outside any caller's transaction (a coalesced trailing wake). $1 channel. */
export const WAKE = `SELECT pg_notify($1, '')`;

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
         e.correlation_id)
        IS DISTINCT FROM
        (s.doc->>'type', s.doc->>'aggregate_type', s.doc->>'aggregate_id',
         s.doc->>'organization_id', s.doc->>'request_id', s.doc->'payload',
         (s.doc->'metadata') - '{${TRACE_CONTEXT_KEYS.join(',')}}'::text[],
         (s.doc->>'causation_id')::uuid, s.doc->>'correlation_id')
`;

/**
 * Leases due live rows and due dead rows in one statement. Dead replays have a reserved share
 * of the batch (half of it, rounded down, so a claim of one row never goes to a replay while live
 * work waits); live rows fill the rest, and dead rows may take what live rows left unused. Rows
 * another relay holds are skipped, not waited for.
 *
 * Each share is a range scan of its due index up to `now()`: a leased row is not in that range
 * (its next_attempt_at is its lease end), so no lease condition is needed and rows resting in
 * backoff or under a lease are never read. Claim order is due order: the time each row became
 * claimable, ties by id (time-ordered UUIDv7, so occurrence order for generated ids).
 *
 * The repository runs it with `synchronous_commit` off for its transaction only (see
 * `OutboxRepository.claim`).
 * $1 limit, $2 lease ms, $3 types (text[] or null).
 */
const DUE_DEAD = `
    SELECT id, next_attempt_at
    FROM outbox_event
    WHERE dispatched_at IS NULL
      AND dead_at IS NOT NULL
      AND discarded_at IS NULL
      AND next_attempt_at <= now()
      AND ($3::text[] IS NULL OR type = ANY ($3::text[]))`;

export const CLAIM = `
  WITH reserved_dead AS (${DUE_DEAD}
    ORDER BY next_attempt_at, id
    LIMIT $1::int / 2
    FOR UPDATE SKIP LOCKED
  ),
  due_live AS (
    SELECT id, next_attempt_at
    FROM outbox_event
    WHERE dispatched_at IS NULL
      AND dead_at IS NULL
      AND next_attempt_at <= now()
      AND ($3::text[] IS NULL OR type = ANY ($3::text[]))
    ORDER BY next_attempt_at, id
    LIMIT (SELECT $1::int - count(*) FROM reserved_dead)
    FOR UPDATE SKIP LOCKED
  ),
  spare_dead AS (${DUE_DEAD}
      AND id NOT IN (SELECT id FROM reserved_dead)
    ORDER BY next_attempt_at, id
    LIMIT (SELECT $1::int - count(*) FROM (SELECT id FROM reserved_dead
                                            UNION ALL SELECT id FROM due_live) AS taken)
    FOR UPDATE SKIP LOCKED
  ),
  picked AS (
    SELECT id, next_attempt_at AS due_at FROM reserved_dead
    UNION ALL SELECT id, next_attempt_at FROM due_live
    UNION ALL SELECT id, next_attempt_at FROM spare_dead
  ),
  claimed AS (
    UPDATE outbox_event AS e
    SET attempts = e.attempts + 1,
        lease_expires_at = now() + make_interval(secs => $2 / 1000.0),
        -- Due again when the lease ends, unless a settle or a release reschedules it first.
        next_attempt_at = now() + make_interval(secs => $2 / 1000.0)
    -- An id array rather than a join, so the update reaches its rows through the primary key
    -- instead of a hash join over the whole table.
    WHERE e.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING e.id, e.type, e.aggregate_type, e.aggregate_id, e.organization_id, e.request_id,
              e.payload, e.metadata, e.occurred_at, e.causation_id, e.correlation_id,
              e.attempts, e.lease_expires_at, e.deliveries, e.failures, e.dead_at, e.last_error
  )
  SELECT claimed.*
  FROM claimed
  JOIN picked USING (id)
  ORDER BY picked.due_at, id
`;

/** `failures` of a row with every handler's retry time cleared. */
function retryTimesCleared(failures: string): string {
  return `(SELECT coalesce(jsonb_object_agg(f.key, f.value || '{"retryAt": null}'::jsonb),
                           '{}'::jsonb)
            FROM jsonb_each(${failures}) AS f)`;
}

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
 *
 * Each failed handler's entry in `failures` becomes `{count, retryAt}` (`retryAt` null once the
 * handler has used its attempts). A live row that stays live is due again at the earliest
 * `retryAt` of its `pending` handlers (those still retrying), or `retry ms` ahead when none has
 * one. A row whose settle says `dead` (every handler left has used its attempts) becomes dead
 * and, in the same statement, one `outbox.event.dead` event is inserted (never for a dead
 * announcement itself, which would otherwise announce its own death forever). A dead row that
 * fails on replay stays dead with a new dead time and announces nothing. Either way a dead row's
 * next replay is written now, its type's dead retry ms ahead ($7, else $8), so replays are found
 * in due order like live rows; a negative dead retry means none (NEVER_DUE), and every retry time of
 * a dead row is cleared (a replay of chosen handlers marked them, see REPLAY_SELECTED). A settle
 * without `dead` (an older caller) is dead at `max attempts`.
 * A row without a lease has already been settled (or given back) for this attempt: a settle
 * retried after its first try committed is stale rather than applied twice. A settle may carry
 * no failure at all (its handlers that ran succeeded, others still wait for their retry): the
 * last error is then kept.
 * $1 jsonb array of {id, attempts, handlers, failed_handlers, error, retry_ms, dead_event_id,
 * dead, failures: [{handler, count, delay_ms}], pending}, $2 max attempts, $3 channel, $4 dead
 * event type, $5 dead event aggregate type, $6 uuid[] of the ids (so rows are found through the
 * primary key), $7 jsonb object of dead retry ms by type, $8 dead retry ms of other types.
 */
export const MARK_FAILED = `
  WITH input AS (
    SELECT *
    FROM jsonb_to_recordset($1::jsonb) AS s(
      id uuid, attempts integer, handlers text[], failed_handlers text[],
      error text, retry_ms double precision, dead_event_id uuid, dead boolean,
      failures jsonb, pending text[])
  ),
  current AS (
    SELECT e.id,
           -- Not for handlers the row already records as delivered (a transactional handler
           -- whose commit landed as its budget ran out): such a row is not dead for them.
           e.dead_at IS NULL AND coalesce(s.dead, s.attempts >= $2)
             AND (s.dead IS NULL OR EXISTS (
               SELECT 1 FROM unnest(s.failed_handlers) AS handler
               WHERE NOT e.deliveries ? handler)) AS becomes_dead,
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
    WHERE e.id = ANY ($6::uuid[])
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
            THEN coalesce(
              (SELECT min((c.failures -> handler ->> 'retryAt')::timestamptz)
               FROM unnest(s.pending) AS handler),
              now() + make_interval(secs => s.retry_ms / 1000.0))
          ELSE (SELECT CASE WHEN ms >= 0 THEN now() + make_interval(secs => ms / 1000.0)
                            ELSE ${NEVER_DUE} END
                FROM coalesce(($7::jsonb ->> e.type)::float8, $8::float8) AS ms)
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
              e.request_id, e.correlation_id, e.attempts, e.last_error, c.becomes_dead,
              s.failed_handlers, s.dead_event_id
  ),
  announced AS (
    INSERT INTO outbox_event
      (id, type, aggregate_type, aggregate_id, organization_id, request_id, payload,
       causation_id, correlation_id)
    SELECT dead_event_id, $4, $5, id::text, organization_id, request_id,
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
 * Makes dead rows due now, so the next claim replays them (every handler not yet delivered gets
 * one more try), and wakes listeners. A row under a lease (a replay already in flight) is left
 * alone: its due time is its lease end, and moving it would let a second claim take it.
 * $1 uuid[] of the ids, $2 channel.
 */
export const REPLAY_DEAD = `
  WITH replayed AS (
    UPDATE outbox_event
    SET next_attempt_at = now()
    WHERE id = ANY ($1::uuid[])
      AND dispatched_at IS NULL
      AND dead_at IS NOT NULL
      AND discarded_at IS NULL
      AND lease_expires_at IS NULL
    RETURNING id
  ),
  woken AS (
    SELECT pg_notify($2, '') FROM (SELECT 1 FROM replayed LIMIT 1) AS any_replayed
  )
  SELECT id, (SELECT count(*) FROM woken) AS woken
  FROM replayed
`;

/**
 * Records one handler's delivery from inside that handler's own transaction (a transactional
 * handler), only if the claim that ran it still holds the row: same attempt, not settled, not
 * given back. The row lock it takes is held to COMMIT, so a claim racing it skips the row, and
 * a claim that won before it makes it match nothing: the caller then rolls the handler's writes
 * back. An entry already present wins, as in every settle.
 * $1 id, $2 attempts, $3 handler name.
 */
export const RECORD_DELIVERY = `
  UPDATE outbox_event
  -- The clock, not now(): now() is when the handler's transaction began, before its work.
  SET deliveries = jsonb_build_object($3::text, clock_timestamp()) || deliveries
  WHERE id = $1::uuid
    AND attempts = $2::int
    AND dispatched_at IS NULL
    AND lease_expires_at IS NOT NULL
  RETURNING id
`;

/**
 * Opens a transactional handler's transaction: the backend's pid and the transaction's start (in
 * microseconds), to cancel its statement when the handler runs out of budget, and a statement
 * timeout for this transaction only, so no single statement of the handler outlives its budget
 * even if the cancel cannot be sent.
 * $1 statement timeout ms, as text.
 */
export const HANDLER_TRANSACTION_SETUP = `
  SELECT pg_backend_pid() AS pid,
         (extract(epoch FROM now()) * 1000000)::bigint::text AS started_us,
         set_config('statement_timeout', $1::text, true) AS timeout
`;

/**
 * Cancels the statement a backend is running, only while that backend is still in the given
 * transaction: a cancel that arrives late must not hit whatever the connection runs next.
 * $1 pid, $2 transaction start in microseconds (text).
 */
export const CANCEL_BACKEND = `
  SELECT coalesce(bool_or(pg_cancel_backend(pid)), false) AS cancelled
  FROM pg_stat_activity
  WHERE pid = $1::int
    AND (extract(epoch FROM xact_start) * 1000000)::bigint = $2::bigint
`;

/** The first entry of each due index: the earliest due time of a live, and of a dead, row. $1 types. */
const EARLIEST_LIVE = `(
  SELECT next_attempt_at
  FROM outbox_event
  WHERE dispatched_at IS NULL
    AND dead_at IS NULL
    AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
  ORDER BY next_attempt_at
  LIMIT 1)`;
const EARLIEST_DEAD = `(
  SELECT next_attempt_at
  FROM outbox_event
  WHERE dispatched_at IS NULL
    AND dead_at IS NOT NULL
    AND discarded_at IS NULL
    -- A row waiting for a replay is not due, ever.
    AND next_attempt_at < ${NEVER_DUE}
    AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
  ORDER BY next_attempt_at
  LIMIT 1)`;

/**
 * Milliseconds until the earliest unsettled row is due (negative when one is already due; null
 * when none is unsettled): the first entry of each due index, two index probes.
 * $1 types (text[] or null).
 */
export const NEXT_DUE = `
  SELECT (extract(epoch FROM least(
            ${EARLIEST_LIVE},
            ${EARLIEST_DEAD}
          ) - now()) * 1000)::float8 AS next_due_in_ms
`;

/**
 * Counts and timings for the dispatcher's next wake and for health reports, at a cost that does
 * not grow with the backlog: timings are index probes, and each count stops after $2 index
 * entries (a count equal to $2 means "at least"). A live row is due (claimable, never leased or
 * given back), retrying (resting until its next attempt), in flight (under a lease) or an
 * expired lease (its lease ended without a settle: a relay crashed or stalled; claimable again).
 * Lag is how long the oldest claimable live row has waited since it became claimable, so rows
 * resting in backoff are not lag.
 *
 * Leases are counted on the small leased index. Due and retrying rows share the due index with
 * leased ones (a leased row's next_attempt_at is its lease end: expired leases sit in the due
 * range, leases in flight beyond it), so each range is counted up to $2 plus the leases in it,
 * and the leases are subtracted. The ORDER BY of every count follows its index, which keeps the
 * planner on the index: a LIMIT without it can look cheaper as a sequential scan.
 * When expired leases reach $2, `due` may include some of them.
 * $1 types (text[] or null), $2 count limit.
 */
export const PENDING_STATE = `
  WITH leases AS (
    SELECT
      (SELECT count(*)
       FROM (SELECT 1
             FROM outbox_event
             WHERE dispatched_at IS NULL
               AND lease_expires_at IS NOT NULL
               AND lease_expires_at > now()
               AND dead_at IS NULL
               AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
             ORDER BY lease_expires_at
             LIMIT $2::int) AS leased)::int AS in_flight,
      (SELECT count(*)
       FROM (SELECT 1
             FROM outbox_event
             WHERE dispatched_at IS NULL
               AND lease_expires_at IS NOT NULL
               AND lease_expires_at <= now()
               AND dead_at IS NULL
               AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
             ORDER BY lease_expires_at
             LIMIT $2::int) AS expired)::int AS expired_leases
  ),
  -- MATERIALIZED: the final SELECT names each figure more than once, and each probe runs once.
  ranges AS MATERIALIZED (
    SELECT
      (SELECT count(*)
       FROM (SELECT 1
             FROM outbox_event
             WHERE dispatched_at IS NULL
               AND dead_at IS NULL
               AND next_attempt_at <= now()
               AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
             ORDER BY next_attempt_at
             LIMIT $2::int + (SELECT expired_leases FROM leases)) AS due)::int AS due_range,
      (SELECT count(*)
       FROM (SELECT 1
             FROM outbox_event
             WHERE dispatched_at IS NULL
               AND dead_at IS NULL
               AND next_attempt_at > now()
               AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
             ORDER BY next_attempt_at
             LIMIT $2::int + (SELECT in_flight FROM leases)) AS later)::int AS later_range,
      (SELECT count(*)
       FROM (SELECT 1
             FROM outbox_event
             WHERE dispatched_at IS NULL
               AND dead_at IS NOT NULL
               AND discarded_at IS NULL
               AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
             ORDER BY next_attempt_at
             LIMIT $2::int) AS dead)::int AS dead,
      ${EARLIEST_LIVE} AS live_due_at,
      ${EARLIEST_DEAD} AS dead_due_at
  )
  SELECT
    least($2::int, greatest(0, r.due_range - l.expired_leases)) AS due,
    least($2::int, greatest(0, r.later_range - l.in_flight)) AS retrying,
    l.in_flight,
    l.expired_leases,
    r.dead,
    (extract(epoch FROM least(r.live_due_at, r.dead_due_at) - now()) * 1000)::float8
      AS next_due_in_ms,
    CASE WHEN r.live_due_at <= now()
      THEN (extract(epoch FROM now() - r.live_due_at) * 1000)::float8
    END AS oldest_due_wait_ms
  FROM leases AS l, ranges AS r
`;

/**
 * PENDING_STATE with exact counts, for an admin page: it reads every unsettled row, so its cost
 * grows with the backlog. $1 types (text[] or null).
 */
export const EXACT_STATE = `
  SELECT
    count(*) FILTER (WHERE dead_at IS NULL AND lease_expires_at IS NULL
                       AND next_attempt_at <= now())::int AS due,
    count(*) FILTER (WHERE dead_at IS NULL AND lease_expires_at IS NULL
                       AND next_attempt_at > now())::int AS retrying,
    count(*) FILTER (WHERE dead_at IS NULL AND lease_expires_at > now())::int AS in_flight,
    count(*) FILTER (WHERE dead_at IS NULL AND lease_expires_at <= now())::int AS expired_leases,
    count(*) FILTER (WHERE dead_at IS NOT NULL)::int AS dead,
    (extract(epoch FROM min(next_attempt_at) FILTER (WHERE next_attempt_at < ${NEVER_DUE}) - now())
     * 1000)::float8 AS next_due_in_ms,
    CASE WHEN min(next_attempt_at) FILTER (WHERE dead_at IS NULL) <= now()
      THEN (extract(epoch FROM now() - min(next_attempt_at) FILTER (WHERE dead_at IS NULL))
            * 1000)::float8
    END AS oldest_due_wait_ms
  FROM outbox_event
  WHERE dispatched_at IS NULL
    AND discarded_at IS NULL
    AND ($1::text[] IS NULL OR type = ANY ($1::text[]))
`;

/**
 * Deletes one batch of rows whose `kept since` column is older than the retention, oldest first;
 * rows locked by anyone are skipped rather than waited for.
 * $1 retention ms, $2 batch size.
 */
function sweepBatch(keptSince: string, undelivered: boolean): string {
  return `
  WITH expired AS (
    SELECT id
    FROM outbox_event
    WHERE ${undelivered ? 'dispatched_at IS NULL AND ' : ''}${keptSince} < now() - make_interval(secs => $1 / 1000.0)
    ORDER BY ${keptSince}
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
}

/** Delivered rows past the retention. Live and dead rows are never candidates. */
export const SWEEP_BATCH = sweepBatch('dispatched_at', false);

/** Discarded rows past their retention (`retention.discardedRetentionMs`). */
export const SWEEP_DISCARDED_BATCH = sweepBatch('discarded_at', true);

/**
 * Gives back claimed rows whose handlers never started (the dispatcher is stopping): the lease
 * ends now, the row is due now, and the attempt that never ran is not counted. Idle peers
 * planned their next wake for when the lease would have ended, so the release wakes them, as an
 * enqueue does.
 * $1 jsonb array of {id, attempts}, $2 uuid[] of the same ids, $3 channel.
 */
export const RELEASE = `
  WITH released AS (
    UPDATE outbox_event AS e
    SET lease_expires_at = NULL,
        next_attempt_at = now(),
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
export const FIND_EVENTS = `
  SELECT id, type, aggregate_type, aggregate_id, organization_id, request_id, payload, metadata,
         occurred_at, causation_id, correlation_id, attempts, deliveries, dispatched_at, dead_at
  FROM outbox_event
  WHERE ${EVENT_FILTER}
  ORDER BY occurred_at, id
  LIMIT $6
`;

/**
 * Travels past backoff: live events that wait for a retry (the event, or one of its handlers, is
 * due later) become due now, and so does each of their handlers still retrying (one that used
 * its attempts stays out). Events already due, in flight, delivered or dead are left alone (a
 * dead event is replayed with REPLAY_DEAD).
 * $1–$5 the filter, $6 the channel to wake.
 */
export const MAKE_DUE = `
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
    SELECT pg_notify($6, '') FROM (SELECT 1 FROM due LIMIT 1) AS any_due
  )
  SELECT id, (SELECT count(*) FROM woken) AS woken
  FROM due
`;

/**
 * A handler's part of `last_error` (`<handler>: <message>; …`, written by the event's last failed
 * attempt), or the whole error for a row that names no failed handler (`handler` null).
 */
function handlerMessage(handler: string, lastError: string): string {
  return `CASE WHEN ${handler} IS NULL THEN ${lastError}
              ELSE (SELECT substr(part, length(${handler}) + 3)
                    FROM unnest(string_to_array(${lastError}, '; ')) AS part
                    WHERE starts_with(part, ${handler} || ': ')
                    LIMIT 1)
         END`;
}

/** A message with UUIDs, hex ids and numbers blanked out, hashed: one kind of error. */
function fingerprintOf(message: string): string {
  return `md5(regexp_replace(coalesce(${message}, ''),
                 '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|0x[0-9a-f]+|\\m[0-9a-f]{8,}\\M|[0-9]+',
                 '#', 'gi'))`;
}

/**
 * The handlers a row failed and has not delivered, as rows `h(key)`; one null key for a row that
 * names none (dead under the event-level rule of an older version).
 */
function failedHandlersOf(failures: string, deliveries: string): string {
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
const DEAD_LETTER_FILTER = `
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
const NEXT_ATTEMPT = `CASE WHEN next_attempt_at < ${NEVER_DUE} THEN next_attempt_at END`;

/**
 * A page of dead letters, newest first by dead time (with retrying events: by dead time, else
 * occurrence) and id, read by keyset from $12/$13 (the last row of the previous page; its time as
 * `dead_letter_key` gives it with microseconds). Dead only, the order is `outbox_event_dead_idx`
 * read backwards. $1–$11 the filter, $14 the page size.
 */
export function listDeadLettersStatement(includeRetrying: boolean): string {
  const key = includeRetrying ? 'coalesce(dead_at, occurred_at)' : 'dead_at';
  return `
  SELECT id, type, aggregate_type, aggregate_id, organization_id, attempts, deliveries, failures,
         last_error, occurred_at, dead_at, ${NEXT_ATTEMPT} AS next_attempt_at, discarded_at,
         discard_reason,
         to_char(${key} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS dead_letter_key
  FROM outbox_event
  WHERE ${DEAD_LETTER_FILTER}
    AND ($12::timestamptz IS NULL OR (${key}, id) < ($12::timestamptz, $13::uuid))
  ORDER BY ${key} DESC, id DESC
  LIMIT $14
`;
}

/**
 * Dead letters grouped by (type, failed handler, error fingerprint), so one outage reads as one
 * line. A row per failed, undelivered handler of each event; `$3` and `$9` then narrow those rows
 * to the handler and the error text asked for. A handler's error is its part of `last_error`
 * (`<handler>: <message>; …`, written by the event's last failed attempt: a handler that used its
 * attempts earlier has none there). An event that records no failed handler (dead under the
 * event-level rule of an older version) gives one row with a null handler and its whole error.
 * The fingerprint is the message with UUIDs, hex ids and numbers blanked out, hashed.
 * $1–$11 the dead-letter filter, $12 the most groups returned (largest first).
 */
export const GROUP_DEAD_LETTERS = `
  WITH failed AS (
    SELECT e.type, h.key AS handler, coalesce(e.dead_at, e.occurred_at) AS seen_at,
           ${handlerMessage('h.key', 'e.last_error')} AS message
    FROM (SELECT * FROM outbox_event WHERE ${DEAD_LETTER_FILTER}) AS e,
         LATERAL ${failedHandlersOf('e.failures', 'e.deliveries')}
    WHERE $3::text IS NULL OR h.key = $3::text
  ),
  fingerprinted AS (
    SELECT type, handler, seen_at, message, ${fingerprintOf('message')} AS fingerprint
    FROM failed
    WHERE $9::text IS NULL OR strpos(lower(message), lower($9::text)) > 0
  )
  SELECT type, handler, fingerprint, min(message) AS sample_error, count(*)::int AS count,
         min(seen_at) AS first_seen_at, max(seen_at) AS last_seen_at
  FROM fingerprinted
  WHERE $11::text IS NULL OR fingerprint = $11::text
  GROUP BY type, handler, fingerprint
  ORDER BY count(*) DESC, max(seen_at) DESC
  LIMIT $12
`;

/** One event whole, whatever its state. $1 id. */
export const FIND_EVENT = `
  SELECT id, type, aggregate_type, aggregate_id, organization_id, request_id, payload, metadata,
         occurred_at, causation_id, correlation_id, attempts, deliveries, failures, last_error,
         lease_expires_at, ${NEXT_ATTEMPT} AS next_attempt_at, dispatched_at, dead_at,
         discarded_at, discard_reason
  FROM outbox_event
  WHERE id = $1::uuid
`;

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
 * Records each changed row as an event of type $17 (payload: the row's identity and
 * `extraPayload`), in the same statement, so audit handlers see every admin change; ids come
 * from $18 (uuid[], one per row of the batch, in id order). Wakes the dispatchers ($19 channel).
 */
function recordChanges(changed: string, extraPayload: string): string {
  return `
  recorded AS (
    INSERT INTO outbox_event
      (id, type, aggregate_type, aggregate_id, organization_id, request_id, payload,
       causation_id, correlation_id)
    SELECT ($18::uuid[])[row_number() OVER (ORDER BY id)], $17::text, '${OUTBOX_EVENT_AGGREGATE}',
           id::text, organization_id, request_id,
           jsonb_build_object('eventId', id, 'type', type, 'aggregateType', aggregate_type,
                              'aggregateId', aggregate_id, ${extraPayload}),
           id, coalesce(correlation_id, id::text)
    FROM ${changed}
    RETURNING id
  ),
  woken AS (
    SELECT pg_notify($19, '') FROM (SELECT 1 FROM recorded LIMIT 1) AS any_recorded
  )
  SELECT p.id, p.type, c.id IS NOT NULL AS changed, (SELECT count(*) FROM woken) AS woken
  FROM picked AS p
  LEFT JOIN ${changed} AS c USING (id)
  ORDER BY p.id
`;
}

/**
 * Replays dead events now (discarded ones too, which are restored): the next claim runs their
 * handlers not yet delivered, or only those of $15 (text[] or null) when given. Named handlers
 * are marked with a retry time of now (the claim of a dead row runs the marked handlers when
 * any is marked, see `OutboxExecutor`); every other mark is cleared. Only handlers that have
 * failed the event and not delivered it can be named: an event none of whose named handlers is
 * such a handler is not selected. $16 true: a dry run that changes nothing
 * and returns what would change. $20 jsonb of the payload's `handlers` and `actor`.
 * $1–$14 as in `adminBatch`, $17–$19 as in `recordChanges`.
 */
export const REPLAY_SELECTED = `
  WITH ${adminBatch(`dead_at IS NOT NULL
      AND ($15::text[] IS NULL OR EXISTS (
        SELECT 1 FROM unnest($15::text[]) AS h(name)
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
           FROM unnest($15::text[]) AS h(name)
           WHERE e.failures ? h.name AND NOT e.deliveries ? h.name),
          '{}'::jsonb)
    FROM picked
    WHERE e.id = picked.id
      AND NOT $16::boolean
    RETURNING e.id, e.type, e.aggregate_type, e.aggregate_id, e.organization_id, e.request_id,
              e.correlation_id
  ),
  ${recordChanges('replayed', `'handlers', $20::jsonb -> 'handlers', 'actor', $20::jsonb -> 'actor'`)}`;

/**
 * Discards events: they stop being replayed, stay visible (listed with `includeDiscarded`) with
 * the time and the reason, and are deleted by the retention sweep later. A retrying event (when
 * the filter includes them) becomes dead as it is discarded; a lease that expired is ended, so
 * its relay's late failure is stale (a late success still marks it delivered, which it then is). $15 unused (null), $16 dry run, $20 jsonb of the
 * payload's `reason` and `actor`. $1–$14 as in `adminBatch`, $17–$19 as in `recordChanges`.
 */
export const DISCARD_SELECTED = `
  WITH ${adminBatch(`discarded_at IS NULL AND $15::text[] IS NULL`)},
  discarded AS (
    UPDATE outbox_event AS e
    SET discarded_at = now(),
        discard_reason = $20::jsonb ->> 'reason',
        dead_at = coalesce(e.dead_at, now()),
        -- Never due: a relay of the previous version, which knows no discard, never claims it.
        next_attempt_at = ${NEVER_DUE},
        lease_expires_at = NULL
    FROM picked
    WHERE e.id = picked.id
      AND NOT $16::boolean
    RETURNING e.id, e.type, e.aggregate_type, e.aggregate_id, e.organization_id, e.request_id,
              e.correlation_id
  ),
  ${recordChanges('discarded', `'reason', $20::jsonb -> 'reason', 'actor', $20::jsonb -> 'actor'`)}`;

/**
 * Undelivered events by type and state, for an operator's status (whose totals are their sums):
 * it reads every undelivered row once, so its cost grows with the backlog (the statement timeout
 * bounds it). States as in EXACT_STATE; `oldest_due_wait_ms` is the type's lag,
 * `next_due_in_ms` when its next row (live or dead) is due.
 */
export const BACKLOG_BY_TYPE = `
  SELECT type,
    count(*) FILTER (WHERE dead_at IS NULL AND lease_expires_at IS NULL
                       AND next_attempt_at <= now())::int AS due,
    count(*) FILTER (WHERE dead_at IS NULL AND lease_expires_at IS NULL
                       AND next_attempt_at > now())::int AS retrying,
    count(*) FILTER (WHERE dead_at IS NULL AND lease_expires_at > now())::int AS in_flight,
    count(*) FILTER (WHERE dead_at IS NULL AND lease_expires_at <= now())::int AS expired_leases,
    count(*) FILTER (WHERE dead_at IS NOT NULL AND discarded_at IS NULL)::int AS dead,
    count(*) FILTER (WHERE discarded_at IS NOT NULL)::int AS discarded,
    (extract(epoch FROM now() - min(next_attempt_at) FILTER (WHERE dead_at IS NULL
                                                              AND next_attempt_at <= now()))
     * 1000)::float8 AS oldest_due_wait_ms,
    (extract(epoch FROM min(next_attempt_at) FILTER (WHERE discarded_at IS NULL
                                                      AND next_attempt_at < ${NEVER_DUE})
                        - now()) * 1000)::float8 AS next_due_in_ms
  FROM outbox_event
  WHERE dispatched_at IS NULL
  GROUP BY type
  ORDER BY type
`;

/**
 * Events delivered in each of the last $1 minutes, oldest first, every minute present (0 when
 * none): one range of `outbox_event_dispatched_idx` per minute.
 */
export const THROUGHPUT = `
  SELECT m.minute,
         (SELECT count(*)::int
          FROM outbox_event
          WHERE dispatched_at >= m.minute
            AND dispatched_at < m.minute + interval '1 minute') AS delivered
  FROM generate_series(date_trunc('minute', now()) - make_interval(mins => $1::int - 1),
                       date_trunc('minute', now()),
                       interval '1 minute') AS m(minute)
  ORDER BY m.minute
`;

/**
 * A dispatcher reports in: its row is written (or rewritten) with `seen_at` now, and rows of
 * dispatchers not seen for a day (their process died without removing them) are cleared.
 * $1 id, $2 host, $3 pid, $4 state, $5 listener, $6 types (text[] or null), $7 concurrency,
 * $8 in flight, $9 started at, $10 last claim at.
 */
export const REPORT_DISPATCHER = `
  WITH forgotten AS (
    DELETE FROM outbox_dispatcher WHERE seen_at < now() - interval '1 day' AND id <> $1
  )
  INSERT INTO outbox_dispatcher
    (id, host, pid, state, listener, types, concurrency, in_flight, started_at, last_claim_at,
     seen_at)
  VALUES ($1, $2, $3, $4, $5, $6::text[], $7, $8, $9, $10, now())
  ON CONFLICT (id) DO UPDATE
  SET state = excluded.state,
      listener = excluded.listener,
      in_flight = excluded.in_flight,
      last_claim_at = excluded.last_claim_at,
      seen_at = now()
`;

/** A stopping dispatcher leaves. $1 id. */
export const FORGET_DISPATCHER = `DELETE FROM outbox_dispatcher WHERE id = $1`;

/** Every dispatcher that reported in, with how long ago (ms) it last did. */
export const LIST_DISPATCHERS = `
  SELECT id, host, pid, state, listener, types, concurrency, in_flight, started_at,
         last_claim_at, seen_at, (extract(epoch FROM now() - seen_at) * 1000)::float8 AS silent_ms
  FROM outbox_dispatcher
  ORDER BY host, pid, id
`;
