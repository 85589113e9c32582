import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Per-key ordering:
 * - `outbox_event.ordering_key`: the key an emitter gave an event (`NewOutboxEvent.orderingKey`),
 *   null for the events ordered by their aggregate until an ordered handler receives one: then
 *   the key it is ordered by, written in full; `ordering_position`: the event's place in its
 *   key, set only for events an ordered handler receives; `ordered_for`: those handlers.
 *   `outbox_event_ordering_idx` finds the events of a key not yet done, in place order: what a
 *   claim reads to tell whether an earlier event still holds the key for a handler.
 *   `outbox_event_blocked_idx` holds the dead events an ordered handler still has to be done
 *   with (the blocked keys' heads), `outbox_event_ordered_retry_idx` the live ones an ordered
 *   handler failed on and retries (the keys held by a retrying head): the admin's and the health
 *   probe's reads, small whatever the backlog.
 * - `outbox_ordering_key`: each key's last position. An emit takes the next one by updating the
 *   key's row, whose lock it holds to COMMIT, so a transaction that commits later gets a later
 *   position: commit order, not the order ids or sequences were drawn in.
 * - `outbox_ordering_wait`: per ordered handler and key, the events emitted and not yet done for
 *   that handler. Read through the update that changes it (the row's latest version, after its
 *   lock), it tells an emit whether an earlier event still holds the key, whatever the emit's
 *   snapshot.
 * Nullable columns without defaults and new tables: nothing is rewritten, and the previous
 * version never reads them. The three indexes are built concurrently by the next migration
 * (`OutboxOrderingIndexes1773500000000`).
 */
/**
 * The due time of a parked event, which only a done of the event ahead of it makes due: the
 * far date of rows only a replay brings back (`NEVER_DUE`), written out as migrations are frozen.
 * Not 'infinity', which PostgreSQL before 17 cannot subtract from, as the state probes do.
 */
export const PARKED = `timestamptz '9999-12-31 00:00:00+00'`;

/** The payload of the outbox's wakes (`WAKE_PAYLOAD`): the transaction's now() in epoch ms. */
const WAKE = `(floor(extract(epoch FROM now()) * 1000))::bigint::text`;

/**
 * The ordered handlers of event `e` that an earlier event of its key still holds: not yet done
 * for them (still in its `ordered_for`), not discarded, and not dead when the handler skips dead
 * events (`p_skip`).
 */
const HELD = (e: string, notIn?: string) => `
  ARRAY(SELECT handler FROM unnest(${e}.ordered_for) AS handler
        WHERE EXISTS (
          SELECT 1 FROM outbox_event AS earlier
          WHERE earlier.ordering_key = ${e}.ordering_key
            AND earlier.ordering_position < ${e}.ordering_position
            AND earlier.dispatched_at IS NULL
            AND earlier.discarded_at IS NULL
            AND handler = ANY (earlier.ordered_for)
            AND NOT (earlier.dead_at IS NOT NULL AND handler = ANY (p_skip))${
              notIn
                ? `
            AND earlier.id <> ALL (${notIn})`
                : ''
            }))`;

/**
 * `outbox_ordered_done_v1(ids, skip, channel)`: after a settle, each ordered handler an event is
 * now done with (the event delivered by this transaction, delivered to the handler, discarded, or
 * dead for a handler that skips dead events) leaves the event's `ordered_for` (unless the event
 * is delivered: nothing reads it then, and it is never settled again), its key's wait count drops, and the next
 * event of the key for that handler, if parked, becomes due, with the dispatchers listening on
 * `channel` woken (at COMMIT, with the wake payload of emits). A few statements for the whole
 * settle, not a few per event. Wait rows are locked in (handler, key) order; a next event locked
 * by another transaction is left to it (that transaction is a settle or a park of it, which
 * decides after this one commits, under the same wait row). Each statement reads a snapshot
 * taken after the one before, so the wake sees the events this settle left.
 * Without bitmap scans: the wake's look for a key's next event then walks
 * `outbox_event_ordering_idx` in place order and stops at the first event, where a bitmap scan
 * reads every event of the key still in the index (delivered ones too, until vacuum), and
 * marks none of those dead for the next look.
 */
const ORDERED_DONE_FUNCTION = `
  CREATE OR REPLACE FUNCTION outbox_ordered_done_v1(p_ids uuid[], p_skip text[], p_channel text)
  RETURNS void
  LANGUAGE plpgsql
  SET enable_bitmapscan = off
  AS $done$
  DECLARE
    v_ids uuid[];
    v_handlers text[];
    v_keys text[];
    v_woken integer;
  BEGIN
    SELECT array_agg(e.id), array_agg(handler), array_agg(e.ordering_key)
    INTO v_ids, v_handlers, v_keys
    FROM outbox_event AS e, unnest(e.ordered_for) AS handler
    WHERE e.id = ANY (p_ids)
      AND (e.dispatched_at = now()
           OR (e.dispatched_at IS NULL
               AND (e.discarded_at IS NOT NULL
                    OR e.deliveries ? handler
                    OR (e.dead_at IS NOT NULL AND handler = ANY (p_skip)))));
    IF v_ids IS NULL THEN
      RETURN;
    END IF;
    -- Wait rows first, as a park takes them: then the events.
    PERFORM 1
    FROM outbox_ordering_wait AS w
    WHERE (w.handler, w.key) IN (SELECT * FROM unnest(v_handlers, v_keys))
    ORDER BY w.handler, w.key
    FOR UPDATE OF w;
    -- A delivered event holds nothing and is never settled again: its ordered_for stays.
    UPDATE outbox_event AS e
    SET ordered_for = ARRAY(
      SELECT kept.handler FROM unnest(e.ordered_for) AS kept(handler)
      WHERE NOT EXISTS (SELECT 1 FROM unnest(v_ids, v_handlers) AS d(id, handler)
                        WHERE d.id = e.id AND d.handler = kept.handler))
    WHERE e.id = ANY (v_ids)
      AND e.dispatched_at IS NULL;
    UPDATE outbox_ordering_wait AS w
    SET waiting = w.waiting - d.done
    FROM (SELECT handler, key, count(*) AS done
          FROM unnest(v_handlers, v_keys) AS p(handler, key)
          GROUP BY handler, key) AS d
    WHERE w.handler = d.handler AND w.key = d.key;
    UPDATE outbox_event
    SET next_attempt_at = now()
    WHERE id IN (
      SELECT x.id FROM outbox_event AS x
      WHERE x.id = ANY (ARRAY(
          SELECT (SELECT n.id FROM outbox_event AS n
                  WHERE n.ordering_key = p.key
                    AND n.ordering_position IS NOT NULL
                    AND n.dispatched_at IS NULL
                    AND n.discarded_at IS NULL
                    AND p.handler = ANY (n.ordered_for)
                  ORDER BY n.ordering_position
                  LIMIT 1)
          FROM (SELECT DISTINCT handler, key FROM unnest(v_handlers, v_keys) AS p(handler, key)) AS p))
        AND x.next_attempt_at = ${PARKED}
        AND x.dead_at IS NULL
      FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS v_woken = ROW_COUNT;
    IF v_woken > 0 THEN
      PERFORM pg_notify(p_channel, ${WAKE});
    END IF;
  END
  $done$`;

/**
 * What a live claim function picks and returns beyond the events: `pick`, its WITH clause up to
 * and including `picked (id, next_attempt_at, ordering_key, ordering_position)`, locked; `batch`,
 * the columns a picked and a chained row add to the batch; `returned`, the columns the function
 * returns after `after`.
 */
export interface ClaimShape {
  pick: string;
  batch?: { picked: string; chained: string };
  returned?: string;
}

/** The first due rows in due order: `outbox_claim_live_v2`'s pick. */
export function duePick(lowerBound: string): ClaimShape {
  return {
    pick: `
    WITH picked AS (
      SELECT o.id, o.next_attempt_at, o.ordering_key, o.ordering_position
      FROM outbox_event AS o
      WHERE o.dispatched_at IS NULL
        AND o.dead_at IS NULL
        AND o.next_attempt_at <= now()${lowerBound}
        AND (p_types IS NULL OR o.type = ANY (p_types))
      ORDER BY o.next_attempt_at, o.id
      LIMIT p_limit
      FOR UPDATE SKIP LOCKED
    ),`,
  };
}

/**
 * The live claim's two forms. With the due rows it picks, it takes the parked events that follow
 * a picked event in its key (up to what the limit leaves), in place order: a key's queue then
 * runs in this process from one claim, each event after the one before it has settled (the
 * engine chains them by `after`), rather than at one claim and one wake per event. Only the
 * first picked event of a key heads a chain; another picked event of the key is not chained (its
 * unordered handlers run at once). `held` is what an earlier event outside the chain holds: one
 * inside it is the chain's to wait for. The parked events are looked up first and locked once
 * the limit has chosen them, so a claim never locks an event it does not take (a done skips a
 * locked event, trusting its locker to settle it).
 */
export function claimFrom(lowerBound: string, shape: ClaimShape = duePick(lowerBound)): string {
  return `
    RETURN QUERY${shape.pick}
    -- The first picked event of each key heads its chain.
    heads AS (
      SELECT p.id, p.next_attempt_at, p.ordering_key, p.ordering_position
      FROM picked AS p
      WHERE p.ordering_position IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM picked AS earlier
                        WHERE earlier.ordering_key = p.ordering_key
                          AND earlier.ordering_position < p.ordering_position)
    ),
    -- The parked events behind each head, looked up without a lock: only those the limit keeps
    -- are locked, so no event is locked by a claim that does not take it.
    following AS (
      SELECT n.id, h.next_attempt_at AS group_due, h.id AS group_id
      FROM heads AS h
      CROSS JOIN LATERAL (
        SELECT x.id, x.ordering_position
        FROM outbox_event AS x
        WHERE x.ordering_key = h.ordering_key
          AND x.ordering_position > h.ordering_position
          AND x.dispatched_at IS NULL
          AND x.discarded_at IS NULL
          AND x.dead_at IS NULL
          AND x.next_attempt_at = ${PARKED}
          AND (p_types IS NULL OR x.type = ANY (p_types))
        ORDER BY x.ordering_key, x.ordering_position
        LIMIT p_limit
      ) AS n
      ORDER BY h.next_attempt_at, h.id, n.ordering_position
      LIMIT greatest(0, p_limit - (SELECT count(*) FROM picked))
    ),
    chained AS (
      SELECT x.id, f.group_due, f.group_id
      FROM outbox_event AS x
      JOIN following AS f ON f.id = x.id
      WHERE x.id = ANY (ARRAY(SELECT following.id FROM following))
        AND x.next_attempt_at = ${PARKED}
        AND x.dispatched_at IS NULL
        AND x.dead_at IS NULL
      FOR UPDATE OF x SKIP LOCKED
    ),
    batch AS MATERIALIZED (
      SELECT id, next_attempt_at AS due, next_attempt_at AS group_due, id AS group_id,
             id IN (SELECT heads.id FROM heads) AS chain${shape.batch?.picked ?? ''}
      FROM picked
      UNION ALL
      SELECT id, now(), group_due, group_id, true${shape.batch?.chained ?? ''} FROM chained
    ),
    claimed AS (
      UPDATE outbox_event AS e
      SET attempts = e.attempts + 1,
          lease_expires_at = now() + make_interval(secs => p_lease_ms / 1000.0),
          next_attempt_at = now() + make_interval(secs => p_lease_ms / 1000.0)
      WHERE e.id = ANY (ARRAY(SELECT batch.id FROM batch))
      RETURNING e
    )
    SELECT claimed.e, (extract(epoch FROM batch.due) * 1000)::float8,
           CASE WHEN (claimed.e).ordering_position IS NULL THEN NULL
                WHEN batch.chain
                THEN ${HELD('(claimed.e)', 'ARRAY(SELECT b.id FROM batch AS b WHERE b.chain)')}
                ELSE ${HELD('(claimed.e)')} END,
           CASE WHEN batch.chain AND (claimed.e).ordering_position IS NOT NULL
             THEN lag((claimed.e).id) OVER (PARTITION BY batch.chain, (claimed.e).ordering_key
                                            ORDER BY (claimed.e).ordering_position) END${
                                              shape.returned ?? ''
                                            }
    FROM claimed
    JOIN batch ON batch.id = (claimed.e).id
    ORDER BY batch.group_due, batch.group_id, (claimed.e).ordering_position;`;
}

/**
 * `outbox_claim_live_v2(limit, lease ms, types, due from, skip)`: `outbox_claim_live_v1` that also
 * takes the parked events that follow a picked one in its key (see `claimFrom`), and returns
 * with each row, in the same statement (one snapshot with the rows it picks), the ordered
 * handlers an earlier event of its key outside the claim holds (`held`: a later snapshot than
 * the pick's could miss an earlier event committed in between and let a handler run early) and
 * the event of its key just before it in the claim (`after`).
 */
const CLAIM_LIVE_V2_FUNCTION = `
  CREATE OR REPLACE FUNCTION outbox_claim_live_v2(
    p_limit integer,
    p_lease_ms double precision,
    p_types text[],
    p_due_from timestamptz,
    p_skip text[]
  )
  RETURNS TABLE (event outbox_event, due_ms double precision, held text[], after uuid)
  LANGUAGE plpgsql
  AS $claim$
  BEGIN
    IF p_due_from IS NULL THEN${claimFrom('')}
    ELSE${claimFrom(`\n        AND o.next_attempt_at >= p_due_from`)}
    END IF;
  END
  $claim$`;

/**
 * `outbox_ordered_park_v1(settles, skip, channel)`: settles claimed events whose handlers left
 * are all held by an earlier event of their key. Under the wait rows of those handlers (locked
 * in order, so a concurrent done has committed or waits), it decides again from a fresh
 * snapshot: parked (due never, until a done wakes it) when still held, due now otherwise, with
 * the dispatchers on `channel` woken. Handlers that ran join `deliveries`; the lease ends. A
 * settle whose attempt moved on is stale (not returned).
 * settles: jsonb array of {id, attempts, handlers}.
 */
const ORDERED_PARK_FUNCTION = `
  CREATE OR REPLACE FUNCTION outbox_ordered_park_v1(p_settles jsonb, p_skip text[], p_channel text)
  RETURNS TABLE (id uuid, parked boolean)
  LANGUAGE plpgsql
  AS $park$
  BEGIN
    PERFORM 1
    FROM outbox_ordering_wait AS w
    WHERE (w.handler, w.key) IN (
      SELECT handler, e.ordering_key
      FROM outbox_event AS e, unnest(e.ordered_for) AS handler
      WHERE e.id IN (SELECT (s->>'id')::uuid FROM jsonb_array_elements(p_settles) AS s))
    ORDER BY w.handler, w.key
    FOR UPDATE OF w;
    RETURN QUERY
    WITH input AS (
      SELECT * FROM jsonb_to_recordset(p_settles) AS s(id uuid, attempts integer, handlers text[])
    ),
    settled AS (
      UPDATE outbox_event AS e
      SET deliveries = (SELECT coalesce(jsonb_object_agg(handler, now()), '{}'::jsonb)
                        FROM unnest(input.handlers) AS handler) || e.deliveries,
          lease_expires_at = NULL,
          next_attempt_at = CASE WHEN cardinality(${HELD('e')}) > 0
                                 THEN ${PARKED} ELSE now() END
      FROM input
      WHERE e.id = input.id
        AND e.attempts = input.attempts
        AND e.dispatched_at IS NULL
        AND e.lease_expires_at IS NOT NULL
      RETURNING e.id, e.next_attempt_at = ${PARKED} AS parked
    )
    SELECT settled.id, settled.parked FROM settled;
    -- The handlers that ran are done with the event: the next event of the key runs for them.
    PERFORM outbox_ordered_done_v1(
      ARRAY(SELECT (s->>'id')::uuid FROM jsonb_array_elements(p_settles) AS s), p_skip, p_channel);
    PERFORM pg_notify(p_channel, ${WAKE})
    FROM outbox_event AS e
    WHERE e.id IN (SELECT (s->>'id')::uuid FROM jsonb_array_elements(p_settles) AS s)
      AND e.next_attempt_at = now()
      AND e.lease_expires_at IS NULL
    LIMIT 1;
  END
  $park$`;

export class OutboxOrdering1773000000000 implements MigrationInterface {
  name = 'OutboxOrdering1773000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE outbox_event
        ADD COLUMN IF NOT EXISTS ordering_key text,
        ADD COLUMN IF NOT EXISTS ordering_position bigint,
        ADD COLUMN IF NOT EXISTS ordered_for text[]
    `);
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS outbox_ordering_key (
        key            text   PRIMARY KEY,
        last_position  bigint NOT NULL
      )
    `);
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS outbox_ordering_wait (
        handler  text   NOT NULL,
        key      text   NOT NULL,
        waiting  bigint NOT NULL,
        PRIMARY KEY (handler, key)
      )
    `);
    await this.createFunctions(queryRunner);
  }

  private async createFunctions(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(ORDERED_DONE_FUNCTION);
    await queryRunner.query(ORDERED_PARK_FUNCTION);
    await queryRunner.query(CLAIM_LIVE_V2_FUNCTION);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `DROP FUNCTION IF EXISTS outbox_claim_live_v2(integer, double precision, text[], timestamptz, text[])`,
    );
    await queryRunner.query(`DROP FUNCTION IF EXISTS outbox_ordered_park_v1(jsonb, text[], text)`);
    await queryRunner.query(`DROP FUNCTION IF EXISTS outbox_ordered_done_v1(uuid[], text[], text)`);
    await queryRunner.query(`DROP TABLE IF EXISTS outbox_ordering_wait`);
    await queryRunner.query(`DROP TABLE IF EXISTS outbox_ordering_key`);
    await queryRunner.query(`
      ALTER TABLE outbox_event
        DROP COLUMN IF EXISTS ordered_for,
        DROP COLUMN IF EXISTS ordering_position,
        DROP COLUMN IF EXISTS ordering_key
    `);
  }
}
