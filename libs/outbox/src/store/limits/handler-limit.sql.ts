/**
 * The statements on `outbox_handler_limit`, the shared state of handlers' limits (see
 * `OutboxHandlerLimits1776000000000`). Times are the database's.
 */

/**
 * Admits a run or says when the limit has room (see `outbox_limit_admit_v1`).
 * Parameters: see `admitParameters`.
 */
export const ADMIT = `
  SELECT admitted, at, retry_at, counted_in
  FROM outbox_limit_admit_v1($1::text, $2::uuid, $3::boolean, $4::text, $5::float8,
                             $6::integer, $7::integer, $8::float8, $9::float8)
`;

/** A run that held a place in flight has returned. $1 handler, $2 partition, $3 run token. */
export const RELEASE_PLACE = `
  UPDATE outbox_handler_limit
  SET holders = holders - $3::text
  WHERE handler = $1 AND partition_key = $2 AND holders ? $3::text
`;

/** What `ADMIT` takes for one run. */
export interface AdmitRequest {
  handler: string;
  /** The event the run is for: a limit per partition counts in its partition. */
  eventId: string;
  perPartition: boolean;
  /** Names the run's place in flight, to give it back (see `RELEASE_PLACE`). */
  token: string;
  /** How long the place counts at most, should the run never say it returned. */
  holdMs: number;
  maxConcurrent: number | null;
  rate: { limit: number; perMs: number } | null;
  /** The least wait of a refused run after the one refused before it. */
  spacingMs: number;
}

export function admitParameters(request: AdmitRequest): unknown[] {
  return [
    request.handler,
    request.eventId,
    request.perPartition,
    request.token,
    request.holdMs,
    request.maxConcurrent,
    request.rate?.limit ?? null,
    request.rate?.perMs ?? null,
    request.spacingMs,
  ];
}
