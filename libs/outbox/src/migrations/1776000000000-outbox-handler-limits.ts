import { MigrationInterface, QueryRunner } from 'typeorm';

const ADMIT_SIGNATURE = `outbox_limit_admit_v1(text, uuid, boolean, text, double precision,
  integer, integer, double precision, double precision)`;

/**
 * Admits one run of a limited handler on event `p_event`, or says when to come back. One row per
 * handler, or per handler and the event's partition with `p_per_partition` (its `partitionKey`,
 * else its organization, else '', as fair claims share out), locked for the decision, so every
 * process on the database shares it:
 * - `holders`: the runs in flight, by run token, each with the time past which it no longer
 *   counts (its budget, so a killed process gives its places back);
 * - `starts`: the admissions of the last `p_per_ms`, oldest first. A sliding log rather than a
 *   bucket: no window of `p_per_ms`, wherever it starts, holds more than `p_rate` of them.
 * The clock is read once the row is locked, so admissions of one limit are logged in the order
 * they happened. The log is kept over 2 % more than the window: a run starts a moment after its
 * admission (the answer's trip back to its process), and that margin keeps the starts as the
 * downstream sees them within the limit too.
 * A refused run is told when the limit has room again, one spacing after the run refused before
 * it (`promised`): `p_spacing_ms` (about a run's time ÷ `p_concurrent`, from the app), and for a
 * rate at least a window ÷ `p_rate`. The runs held back come back in turn, not all at once.
 * A null `p_concurrent` or `p_rate` is no limit of that kind. The limit as the app declares it
 * (`max_concurrent`, `rate_limit`, `per_ms`) is written each time, for an operator to read.
 */
const ADMIT_FUNCTION = `
  CREATE OR REPLACE FUNCTION outbox_limit_admit_v1(
    p_handler text, p_event uuid, p_per_partition boolean, p_token text,
    p_hold_ms double precision, p_concurrent integer, p_rate integer,
    p_per_ms double precision, p_spacing_ms double precision)
  RETURNS TABLE (admitted boolean, at timestamptz, retry_at timestamptz, counted_in text)
  LANGUAGE plpgsql
  SET jit = off
  AS $admit$
  DECLARE
    v_limit outbox_handler_limit%ROWTYPE;
    v_now timestamptz;
    v_holders jsonb;
    v_starts timestamptz[];
    v_retry timestamptz;
    v_window interval;
    v_spacing interval;
    v_partition text := '';
  BEGIN
    IF p_per_partition THEN
      SELECT coalesce(e.partition_key, e.organization_id, '') INTO v_partition
      FROM outbox_event AS e WHERE e.id = p_event;
      v_partition := coalesce(v_partition, '');
    END IF;
    INSERT INTO outbox_handler_limit (handler, partition_key)
    VALUES (p_handler, v_partition)
    ON CONFLICT DO NOTHING;
    SELECT * INTO v_limit
    FROM outbox_handler_limit
    WHERE handler = p_handler AND partition_key = v_partition
    FOR UPDATE;
    v_now := clock_timestamp();
    -- What is kept does not depend on this caller's limits, only on time: during a rollout that
    -- adds or drops one, the pods declaring it still find its places and its log.
    v_window := make_interval(secs => coalesce(p_per_ms, v_limit.per_ms, 0) * 1.02 / 1000.0);
    SELECT coalesce(jsonb_object_agg(h.key, h.value), '{}'::jsonb) INTO v_holders
    FROM jsonb_each(v_limit.holders) AS h
    WHERE (h.value #>> '{}')::timestamptz > v_now;
    v_starts := ARRAY(
      SELECT s FROM unnest(v_limit.starts) AS s WHERE s > v_now - v_window ORDER BY s);
    IF (p_concurrent IS NULL OR (SELECT count(*) FROM jsonb_object_keys(v_holders)) < p_concurrent)
       AND (p_rate IS NULL OR cardinality(v_starts) < p_rate) THEN
      UPDATE outbox_handler_limit
      SET holders = CASE WHEN p_concurrent IS NULL THEN v_holders
                         ELSE v_holders || jsonb_build_object(
                                p_token, v_now + make_interval(secs => p_hold_ms / 1000.0))
                    END,
          starts = CASE WHEN p_rate IS NULL THEN v_starts ELSE v_starts || v_now END,
          max_concurrent = p_concurrent, rate_limit = p_rate,
          per_ms = coalesce(p_per_ms, per_ms)
      WHERE handler = p_handler AND partition_key = v_partition;
      RETURN QUERY SELECT true, v_now, NULL::timestamptz, v_partition;
      RETURN;
    END IF;
    -- A rate lets one run in each window ÷ limit: the runs held back are spaced no closer.
    v_spacing := make_interval(secs => greatest(
      p_spacing_ms, CASE WHEN p_rate IS NOT NULL THEN p_per_ms * 1.02 / p_rate ELSE 0 END) / 1000.0);
    v_retry := v_now + v_spacing;
    IF p_rate IS NOT NULL AND cardinality(v_starts) >= p_rate THEN
      v_retry := greatest(v_retry, v_starts[cardinality(v_starts) - p_rate + 1] + v_window);
    END IF;
    v_retry := greatest(v_retry, v_limit.promised + v_spacing);
    UPDATE outbox_handler_limit
    SET holders = v_holders, starts = v_starts, promised = v_retry, held = held + 1,
        max_concurrent = p_concurrent, rate_limit = p_rate, per_ms = coalesce(p_per_ms, per_ms)
    WHERE handler = p_handler AND partition_key = v_partition;
    RETURN QUERY SELECT false, v_now, v_retry, v_partition;
  END
  $admit$`;

/**
 * Limits of handlers that hold across every process on the database (`limit` of
 * `@OnOutboxEvent`): the table `outbox_handler_limit` and the function that admits a run,
 * `outbox_limit_admit_v1`. A small table of its own: only runs of limited handlers touch it,
 * and the previous version never does.
 */
export class OutboxHandlerLimits1776000000000 implements MigrationInterface {
  name = 'OutboxHandlerLimits1776000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE IF NOT EXISTS outbox_handler_limit (
        handler        text          NOT NULL,
        partition_key  text          NOT NULL,
        holders        jsonb         NOT NULL DEFAULT '{}',
        starts         timestamptz[] NOT NULL DEFAULT '{}',
        promised       timestamptz,
        held           bigint        NOT NULL DEFAULT 0,
        max_concurrent integer,
        rate_limit     integer,
        per_ms         double precision,
        PRIMARY KEY (handler, partition_key)
      )
    `);
    await queryRunner.query(ADMIT_FUNCTION);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION IF EXISTS ${ADMIT_SIGNATURE}`);
    await queryRunner.query(`DROP TABLE IF EXISTS outbox_handler_limit`);
  }
}
