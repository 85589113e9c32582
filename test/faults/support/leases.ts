import type { FaultDatabase } from './database';

/**
 * A log of lease changes, written by a trigger on `outbox_event` that only the scenario that
 * installs it has: `claim` (attempts up, a lease set), `release` (a claimed event given back
 * unstarted: attempts down, lease cleared) and `settle` (lease cleared, attempts kept). The
 * engine's statements are the real ones; the log only watches them.
 */
const LEASE_LOG = `
  CREATE TABLE fault_lease (
    id bigserial PRIMARY KEY,
    event_id uuid NOT NULL,
    kind text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
  );
  CREATE INDEX fault_lease_event_idx ON fault_lease (event_id, at);
  CREATE FUNCTION fault_lease_log() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    INSERT INTO fault_lease (event_id, kind)
    VALUES (NEW.id, CASE WHEN NEW.attempts > OLD.attempts THEN 'claim'
                         WHEN NEW.attempts < OLD.attempts THEN 'release'
                         ELSE 'settle' END);
    RETURN NULL;
  END $$;
  CREATE TRIGGER fault_lease_log AFTER UPDATE ON outbox_event FOR EACH ROW
  WHEN (NEW.attempts <> OLD.attempts
        OR (OLD.lease_expires_at IS NOT NULL AND NEW.lease_expires_at IS NULL))
  EXECUTE FUNCTION fault_lease_log();
`;

export async function logLeases(db: FaultDatabase): Promise<void> {
  await db.query(LEASE_LOG);
}

export interface GiveBacks {
  /** Events given back unstarted. */
  released: number;
  /** Of those, taken again by a claim. */
  taken: number;
  /** Release to the next claim of the same event, in ms. */
  medianMs: number | null;
  maxMs: number | null;
  /** Claims of an event whose previous claim was neither settled nor released: its lease ran out. */
  leaseExpiries: number;
}

/**
 * What happened after each give-back, and how many claims had to wait for a lease to end. With
 * `windows` (epoch ms ranges), only the give-backs made within one of them are counted (those of
 * a shutdown, say, rather than of a local queue's TTL during a backlog).
 */
export async function giveBacks(
  db: FaultDatabase,
  windows?: ReadonlyArray<readonly [number, number]>,
): Promise<GiveBacks> {
  const [row] = await db.query(
    `
    WITH ordered AS (
      SELECT event_id, kind, at,
             lag(kind) OVER (PARTITION BY event_id ORDER BY at, id) AS before,
             lead(kind) OVER (PARTITION BY event_id ORDER BY at, id) AS after,
             lead(at) OVER (PARTITION BY event_id ORDER BY at, id) AS after_at
      FROM fault_lease
    ),
    released AS (
      SELECT extract(epoch FROM after_at - at) * 1000 AS ms, after = 'claim' AS taken
      FROM ordered
      WHERE kind = 'release'
        AND ($1::float8[] IS NULL OR EXISTS (
          SELECT 1 FROM unnest($1::float8[], $2::float8[]) AS w(from_ms, to_ms)
          WHERE extract(epoch FROM at) * 1000 BETWEEN w.from_ms AND w.to_ms))
    )
    SELECT (SELECT count(*)::int FROM released) AS released,
           (SELECT count(*) FILTER (WHERE taken)::int FROM released) AS taken,
           (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) FROM released WHERE taken)::float8
             AS median_ms,
           (SELECT max(ms) FROM released WHERE taken)::float8 AS max_ms,
           (SELECT count(*)::int FROM ordered WHERE kind = 'claim' AND before = 'claim')
             AS lease_expiries`,
    [windows?.map((w) => w[0]) ?? null, windows?.map((w) => w[1]) ?? null],
  );
  return {
    released: row.released,
    taken: row.taken,
    medianMs: row.median_ms,
    maxMs: row.max_ms,
    leaseExpiries: row.lease_expiries,
  };
}

/** Where the slow events' time went: waiting to be claimed, and claimed but not yet started. */
export interface SlowSplit {
  /** Events emitted in the window whose first handler call came later than `overMs`. */
  slow: number;
  /** Of those, the largest share of the wait spent before the first claim / after it, in ms. */
  maxBeforeClaimMs: number | null;
  maxClaimedMs: number | null;
  /** Of those, how many waited longer claimed than unclaimed (a slot's wait, not a claim's). */
  mostlyClaimed: number;
}

/**
 * For the events emitted from `fromMs` to `toMs` whose first handler call came later than
 * `overMs` after their commit: how long each waited for its first claim, and from that claim to
 * its first call (in an instance's local queue, behind its slots).
 */
export async function slowSplit(
  db: FaultDatabase,
  fromMs: number,
  toMs: number,
  overMs: number,
): Promise<SlowSplit> {
  const [row] = await db.query(
    `WITH per_event AS (
       SELECT e.id, e.occurred_at,
              (SELECT min(l.at) FROM fault_lease l WHERE l.event_id = e.id AND l.kind = 'claim')
                AS claimed_at,
              (SELECT min(c.at) FROM fault_call c WHERE c.event_id = e.id) AS called_at
       FROM outbox_event e
       WHERE e.occurred_at >= to_timestamp($1 / 1000.0) AND e.occurred_at < to_timestamp($2 / 1000.0)
     ),
     slow AS (
       SELECT extract(epoch FROM claimed_at - occurred_at) * 1000 AS before_claim,
              extract(epoch FROM called_at - claimed_at) * 1000 AS claimed
       FROM per_event
       WHERE extract(epoch FROM called_at - occurred_at) * 1000 > $3
     )
     SELECT count(*)::int AS slow, max(before_claim)::float8 AS max_before,
            max(claimed)::float8 AS max_claimed,
            count(*) FILTER (WHERE claimed > before_claim)::int AS mostly_claimed
     FROM slow`,
    [fromMs, toMs, overMs],
  );
  return {
    slow: row.slow,
    maxBeforeClaimMs: row.max_before,
    maxClaimedMs: row.max_claimed,
    mostlyClaimed: row.mostly_claimed,
  };
}
