import { WAKE_PAYLOAD } from '../wake-payload.sql';
/**
 * Gives back claimed rows whose handlers never started (the engine is stopping): the lease
 * ends now, the row is due now, and the attempt that never ran is not counted. Idle peers
 * planned their next wake for when the lease would have ended, so the release wakes them, as an
 * enqueue does.
 * Parameters: see `releaseParameters`.
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
    SELECT pg_notify($3, ${WAKE_PAYLOAD}) FROM (SELECT 1 FROM released LIMIT 1) AS any_released
  )
  SELECT id, (SELECT count(*) FROM woken) AS woken
  FROM released
`;

/** $1 jsonb array of {id, attempts}, $2 uuid[] of the same ids, $3 channel. */
export function releaseParameters(
  claims: readonly { id: string; attempts: number }[],
  channel: string,
): unknown[] {
  const input = claims.map((c) => ({ id: c.id, attempts: c.attempts }));
  return [JSON.stringify(input), input.map((c) => c.id), channel];
}
