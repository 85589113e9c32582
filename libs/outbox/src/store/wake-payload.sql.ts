/**
 * The payload of every NOTIFY the outbox sends: the `now()` of the transaction that made rows
 * due, in epoch milliseconds, rounded down. Rows written by that transaction are due no earlier
 * (their `next_attempt_at` is that `now()` or later), so a listener that only claims from a lower
 * bound (see `DueRange` in the engine) lowers it to this time and finds them, however late the
 * transaction committed. An empty or foreign payload (a previous version's wake, a NOTIFY sent
 * by hand) names no time: the listener then claims from the start of the due range.
 */
export const WAKE_PAYLOAD = `(floor(extract(epoch FROM now()) * 1000))::bigint::text`;

/** The time a wake's payload names, in epoch ms, or null when it names none. */
export function dueFromPayload(payload: string): number | null {
  if (!/^\d{1,15}$/.test(payload)) return null;
  return Number(payload);
}
