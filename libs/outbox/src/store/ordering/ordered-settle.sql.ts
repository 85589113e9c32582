import { inlineValues } from '../bounded-statement.util';
import type { DeliveredSettle, OrderedSettleOptions } from '../lease/lease.types';

/**
 * After a settle, in its transaction: what the settled events are now done with, for their
 * ordered handlers (see `outbox_ordered_done_v1`), waking `channel` for the events it makes due.
 * Written out with its values, so it follows the
 * settle in the same script; its rows are not read.
 */
export function orderedDone(
  ids: readonly string[],
  ordering: OrderedSettleOptions,
  channel: string,
): string {
  return inlineValues(`SELECT outbox_ordered_done_v1($1::uuid[], $2::text[], $3::text)`, [
    [...ids],
    [...ordering.skipDead],
    channel,
  ]);
}

/**
 * Settles events whose handlers left are all held by an earlier event of their key: parked, or
 * due again when the earlier event was done meanwhile (see `outbox_ordered_park_v1`).
 * $1 jsonb array of {id, attempts, handlers}, $2 the ordered handlers that skip dead events,
 * $3 the channel woken when an event is due again.
 */
export const PARK = `SELECT id, parked FROM outbox_ordered_park_v1($1::jsonb, $2::text[], $3::text)`;

export function parkParameters(
  settles: readonly DeliveredSettle[],
  ordering: OrderedSettleOptions,
  channel: string,
): unknown[] {
  const input = settles.map((s) => ({ id: s.id, attempts: s.attempts, handlers: s.handlers }));
  return [JSON.stringify(input), [...ordering.skipDead], channel];
}
