import { orderingKeyOf, type DeliveryStateRow, type EventRow } from '../event-row.mapping';
import { typeFilter } from '../store.client';
import type { ClaimOptions, OutboxRecord } from './lease.types';
import { heldBehindEarlier } from '../ordering/ordering.sql';

/**
 * Leases due live rows and due dead rows in one statement (`CLAIM`), or due live rows alone
 * (`CLAIM_LIVE`). Dead replays have a reserved share of a `CLAIM` (half of it, rounded down, so a
 * claim of one row never goes to a replay while live work waits); live rows fill the rest, and
 * dead rows may take what live rows left unused. Rows another relay holds are skipped, not
 * waited for.
 *
 * Each share is a range scan of its due index up to `now()`: a leased row is not in that range
 * (its next_attempt_at is its lease end), so no lease condition is needed and rows resting in
 * backoff or under a lease are never read. Claim order is due order: the time each row became
 * claimable, ties by id (time-ordered UUIDv7, so occurrence order for generated ids).
 *
 * The live share may start at a lower bound ($4, `dueFrom`) rather than at the start of its
 * index. Every claim and settle moves a row out of the front of the due range, leaving an index
 * entry behind that only VACUUM removes; while a long transaction holds the xmin horizon (a
 * backup, a report) VACUUM cannot, and a scan from the start would walk every entry left since
 * then. The engine keeps the bound at the head of the range (see `DueRange`).
 *
 * Due dead rows are few and rare, and the three shares cost the server about twice the planning
 * and execution of the live share alone, on every claim: so the engine sends `CLAIM_LIVE` unless
 * dead rows may be due (see `DeadLook`). At 100 events/s, all but about one claim a second are
 * `CLAIM_LIVE`.
 *
 * The repository runs them with `synchronous_commit` off for their transaction only (see
 * `OutboxLeaseStore.claim`).
 * Parameters: see `claimParameters`.
 */
/**
 * The ordered handlers of a claimed row that must wait: those it still waits on (`ordered_for`,
 * which a settle done with a handler leaves) that an earlier event of its key holds (see
 * `heldBehindEarlier`; $5 the handlers that skip dead events). The test `outbox_claim_live_v2`
 * makes, without its chains (every earlier event counts, in the claim or not), for the claims
 * that do not go through it; null for a row no ordered handler receives. It must read the
 * snapshot that picked the rows: a later one could miss an earlier event committed in between
 * and let a handler run early.
 */
function heldHandlers(row: string): string {
  return `
    CASE WHEN ${row}.ordering_position IS NOT NULL THEN
      ARRAY(SELECT handler FROM unnest(${row}.ordered_for) AS handler
            WHERE ${heldBehindEarlier(row, 'handler', '$5::text[]')})
    END`;
}

/**
 * The columns of a claimed row that the driver would otherwise decode at a cost on every row of
 * every claim: times as epoch ms (a timestamp's text is parsed by a regular expression), and
 * the delivery maps as null while empty (as they are on a first attempt) rather than `{}` to
 * parse. See `toRecords`.
 */
function claimedState(row: string): string {
  return `(extract(epoch FROM ${row}.occurred_at) * 1000)::float8 AS occurred_ms,
          (extract(epoch FROM ${row}.dead_at) * 1000)::float8 AS dead_ms,
          nullif(${row}.deliveries, '{}') AS deliveries,
          nullif(${row}.failures, '{}') AS failures`;
}

const DUE_DEAD = `
    SELECT id, next_attempt_at
    FROM outbox_event
    WHERE dispatched_at IS NULL
      AND dead_at IS NOT NULL
      AND discarded_at IS NULL
      AND next_attempt_at <= now()
      AND ($3::text[] IS NULL OR type = ANY ($3::text[]))`;

const DUE_LIVE = `
    SELECT id, next_attempt_at
    FROM outbox_event
    WHERE dispatched_at IS NULL
      AND dead_at IS NULL
      AND next_attempt_at <= now()
      AND ($4::timestamptz IS NULL OR next_attempt_at >= $4::timestamptz)
      AND ($3::text[] IS NULL OR type = ANY ($3::text[]))
    ORDER BY next_attempt_at, id`;

/**
 * Leases the picked rows: due again when the lease ends, unless a settle or a release
 * reschedules it first. The update finds its rows through an id array rather than a join, so it
 * reaches them through the primary key: a join with the picked rows (which the planner guesses
 * at one) becomes a nested loop that looks up every id for each picked row.
 */
const LEASE_PICKED = `
  claimed AS (
    UPDATE outbox_event AS e
    SET attempts = e.attempts + 1,
        lease_expires_at = now() + make_interval(secs => $2 / 1000.0),
        next_attempt_at = now() + make_interval(secs => $2 / 1000.0)
    WHERE e.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING e.id, e.type, e.aggregate_type, e.aggregate_id, e.organization_id, e.request_id,
              e.payload, e.metadata, e.causation_id, e.correlation_id, e.ordering_key,
              e.attempts, e.last_error,
              ${claimedState('e')},
              (extract(epoch FROM e.lease_expires_at) * 1000)::float8 AS lease_expires_ms,
              -- The claim's own clock: handlers' retry times are compared with it.
              (extract(epoch FROM now()) * 1000)::float8 AS claimed_ms,
              ${heldHandlers('e')} AS held
  )
  SELECT claimed.*, (extract(epoch FROM picked.next_attempt_at) * 1000)::float8 AS due_ms
  FROM claimed
  JOIN picked USING (id)
  ORDER BY picked.next_attempt_at, id`;

export const CLAIM = `
  WITH reserved_dead AS (${DUE_DEAD}
    ORDER BY next_attempt_at, id
    LIMIT $1::int / 2
    FOR UPDATE SKIP LOCKED
  ),
  due_live AS (${DUE_LIVE}
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
    SELECT id, next_attempt_at FROM reserved_dead
    UNION ALL SELECT id, next_attempt_at FROM due_live
    UNION ALL SELECT id, next_attempt_at FROM spare_dead
  ),${LEASE_PICKED}
`;

/**
 * `CLAIM` without dead rows: the live share takes the whole limit. Sent only while the database
 * lacks `outbox_claim_live_v2`, which runs the same claim from plans it keeps (`CLAIM_LIVE_CALL`).
 */
export const CLAIM_LIVE = `
  WITH picked AS (${DUE_LIVE}
    LIMIT $1::int
    FOR UPDATE SKIP LOCKED
  ),${LEASE_PICKED}
`;

/** What every claim function's row `c` gives, as `toRecords` reads it. */
const CALLED = `(c.event).id, (c.event).type, (c.event).aggregate_type, (c.event).aggregate_id,
         (c.event).organization_id, (c.event).request_id, (c.event).payload, (c.event).metadata,
         (c.event).causation_id, (c.event).correlation_id, (c.event).ordering_key,
         (c.event).attempts, (c.event).last_error,
         ${claimedState('(c.event)')},
         (extract(epoch FROM (c.event).lease_expires_at) * 1000)::float8 AS lease_expires_ms,
         (extract(epoch FROM now()) * 1000)::float8 AS claimed_ms,
         c.due_ms,
         c.held,
         c.after`;

/**
 * `CLAIM_LIVE` through `outbox_claim_live_v2` (migration `OutboxOrdering1773000000000`),
 * the same rows in the same shape, and the parked events that follow a picked one in its key
 * (chained by `after`): the server plans this call, not the claim, on every claim.
 */
export const CLAIM_LIVE_CALL = `
  SELECT ${CALLED}
  FROM outbox_claim_live_v2($1::int, $2::float8, $3::text[], $4::timestamptz, $5::text[])
       WITH ORDINALITY AS c (event, due_ms, held, after, position)
  ORDER BY c.position
`;

/**
 * `CLAIM_LIVE_CALL` through `outbox_claim_fair_v1` (migration `OutboxFairClaims1775000000000`):
 * the claim shared out across partitions, from after partition $6, visiting at most $7 of them.
 * Each row also tells its partition, whether the fill took it (`from_fill`), and where the visit
 * stopped (`visited`, the same on every row).
 */
export const CLAIM_FAIR_CALL = `
  SELECT ${CALLED},
         coalesce((c.event).partition_key, (c.event).organization_id, '') AS partition,
         c.from_fill,
         c.visited
  FROM outbox_claim_fair_v1($1::int, $2::float8, $3::text[], $4::timestamptz, $5::text[],
                            $6::text, $7::int)
       WITH ORDINALITY AS c (event, due_ms, held, after, from_fill, visited, position)
  ORDER BY c.position
`;

/**
 * Which claim functions this database has, found through search_path as the calls are: the
 * fair one counts only with its index built and valid (a claim without it would read the due
 * index for every partition).
 */
export const CLAIM_FUNCTIONS_PRESENT = `
  SELECT to_regprocedure('outbox_claim_live_v2(integer, double precision, text[], timestamptz, text[])')
           IS NOT NULL AS chained,
         to_regprocedure('outbox_claim_fair_v1(integer, double precision, text[], timestamptz, text[], text, integer)')
           IS NOT NULL
           AND coalesce((SELECT i.indisvalid FROM pg_index AS i
                         WHERE i.indexrelid = to_regclass('outbox_event_fair_idx')), false) AS fair`;

/** Most partitions one fair claim visits: each costs an index probe of about 3 buffers. */
export const FAIR_VISIT_MAX = 500;

/**
 * $1 limit, $2 lease ms, $3 types (text[] or null), $4 live rows due from (or null: all), $5 the
 * ordered handlers whose dead events do not hold their key.
 */
export function claimParameters(options: ClaimOptions): unknown[] {
  const dueFrom = options.dueFrom ?? null;
  return [
    options.limit,
    options.leaseMs,
    typeFilter(options),
    dueFrom === null ? null : new Date(dueFrom),
    [...(options.skipDead ?? [])],
  ];
}

/** `claimParameters`, then $6 the partition to start after, $7 how many partitions to visit. */
export function fairClaimParameters(options: ClaimOptions, after: string): unknown[] {
  return [...claimParameters(options), after, Math.min(options.limit, FAIR_VISIT_MAX)];
}

const NONE_HELD: readonly string[] = Object.freeze([]);
/** What most claimed rows carry: read-only, so one object serves every row. */
const NONE_DELIVERED: DeliveryStateRow['deliveries'] = Object.freeze({});
const NONE_FAILED: DeliveryStateRow['failures'] = Object.freeze({});

export interface ClaimedRow
  extends
    Omit<EventRow, 'occurred_at'>,
    Omit<DeliveryStateRow, 'deliveries' | 'failures' | 'dead_at'> {
  occurred_ms: number;
  dead_ms: number | null;
  deliveries: DeliveryStateRow['deliveries'] | null;
  failures: DeliveryStateRow['failures'] | null;
  lease_expires_ms: number;
  claimed_ms: number;
  due_ms: number;
  held: string[] | null;
  /** Only the claim function chains a key's events (`outbox_claim_live_v2`). */
  after?: string | null;
  /** Only the fair claim tells these (`outbox_claim_fair_v1`). */
  partition?: string;
  from_fill?: boolean;
  visited?: string | null;
}

/**
 * One object literal with every field, not a spread of `toEvent`: a spread followed by more
 * fields builds each record through V8's slow path (about 20 µs a row, the claim's largest cost
 * in the engine's process). The claim's clock and lease end are one value for every row (one
 * statement's `now()`): their Dates are made once and shared (the engine only reads them).
 */
export function toRecords(rows: ClaimedRow[]): OutboxRecord[] {
  const shared = sharedDates();
  return rows.map((row) => ({
    id: row.id,
    type: row.type,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    organizationId: row.organization_id,
    requestId: row.request_id,
    payload: row.payload,
    metadata: row.metadata,
    occurredAt: new Date(row.occurred_ms),
    causationId: row.causation_id,
    correlationId: row.correlation_id,
    orderingKey: orderingKeyOf(row),
    attempts: row.attempts,
    claimedAt: shared(row.claimed_ms),
    dueAt: new Date(row.due_ms),
    leaseExpiresAt: shared(row.lease_expires_ms),
    deliveries: row.deliveries ?? NONE_DELIVERED,
    failures: row.failures ?? NONE_FAILED,
    deadAt: row.dead_ms === null ? null : new Date(row.dead_ms),
    lastError: row.last_error,
    held: row.held?.length ? row.held : NONE_HELD,
    sequenced: row.held !== null,
    after: row.after ?? null,
    partition: row.partition ?? row.organization_id ?? '',
    fromFill: row.from_fill,
  }));
}

/** A Date per distinct epoch ms value, remembered across calls of one claim's rows. */
function sharedDates(): (ms: number) => Date {
  const dates = new Map<number, Date>();
  return (ms) => {
    let date = dates.get(ms);
    if (!date) {
      date = new Date(ms);
      dates.set(ms, date);
    }
    return date;
  };
}
