import { NEVER_DUE } from '../outbox-row.sql';
/**
 * Gives events just written by this transaction their places in their keys, for the ordered
 * handlers they go to. Runs after the enqueue, in the caller's transaction, on the events it
 * inserted (a duplicate takes no place).
 *
 * - Positions: each key's row in `outbox_ordering_key` moves on by the key's events in this call,
 *   in emit order. The row stays locked to COMMIT: a concurrent transaction emitting into the
 *   same key waits, then takes the positions after these, so positions follow commit order.
 * - Waiting: each (ordered handler, key) row in `outbox_ordering_wait` counts the events not
 *   yet done for that handler. The count this update returns is the row's latest, read after its
 *   lock, so it holds even when this statement's snapshot is older than a concurrent settle.
 * - An event whose handlers are all ordered, and each has an earlier event of the key still
 *   waiting, is parked (due at NEVER_DUE): no claim takes it until the settle that
 *   frees its key makes it due. Keys and (handler, key) rows are locked in one order (sorted), so
 *   two emits into the same keys cannot deadlock.
 *
 * $1 the events' ids, $2 their keys (`orderingKeyOf`), $3 whether each may be parked (all its
 * handlers are ordered), all in emit order; $4 and $5 the (event, ordered handler) pairs: the
 * event's index in $1 (from 1) and the handler's name.
 */
export const SEQUENCE = `
  WITH sequenced AS (
    SELECT id, key, parkable, n
    FROM unnest($1::uuid[], $2::text[], $3::boolean[]) WITH ORDINALITY AS s(id, key, parkable, n)
  ),
  per_key AS (
    SELECT key, count(*) AS events FROM sequenced GROUP BY key
  ),
  positions AS (
    INSERT INTO outbox_ordering_key AS k (key, last_position)
    SELECT key, events FROM per_key ORDER BY key
    ON CONFLICT (key) DO UPDATE SET last_position = k.last_position + excluded.last_position
    RETURNING k.key, k.last_position
  ),
  pairs AS (
    SELECT sequenced.id, sequenced.key, sequenced.n, p.handler
    FROM unnest($4::int[], $5::text[]) AS p(n, handler)
    JOIN sequenced USING (n)
  ),
  per_wait AS (
    SELECT handler, key, count(*) AS events FROM pairs GROUP BY handler, key
  ),
  waits AS (
    INSERT INTO outbox_ordering_wait AS w (handler, key, waiting)
    SELECT handler, key, events FROM per_wait ORDER BY handler, key
    ON CONFLICT (handler, key) DO UPDATE SET waiting = w.waiting + excluded.waiting
    RETURNING w.handler, w.key, w.waiting
  ),
  -- For each pair: events of the key still waiting for the handler before this one.
  ahead AS (
    SELECT pairs.id,
           waits.waiting - per_wait.events
             + row_number() OVER (PARTITION BY pairs.handler, pairs.key ORDER BY pairs.n) - 1
             AS waiting_ahead
    FROM pairs
    JOIN waits USING (handler, key)
    JOIN per_wait USING (handler, key)
  ),
  -- Grouped once and joined: a subquery per event would redo the window over every pair.
  held AS (
    SELECT id, bool_and(waiting_ahead > 0) AS all_held FROM ahead GROUP BY id
  ),
  placed AS (
    SELECT sequenced.id, sequenced.key,
           positions.last_position - per_key.events
             + row_number() OVER (PARTITION BY sequenced.key ORDER BY sequenced.n) AS position,
           sequenced.parkable AND coalesce(held.all_held, false) AS parked
    FROM sequenced
    JOIN positions USING (key)
    JOIN per_key USING (key)
    LEFT JOIN held USING (id)
  )
  UPDATE outbox_event AS e
  SET ordering_key = placed.key,
      ordering_position = placed.position,
      ordered_for = (SELECT array_agg(pairs.handler ORDER BY pairs.handler)
                     FROM pairs WHERE pairs.id = placed.id),
      next_attempt_at = CASE WHEN placed.parked THEN ${NEVER_DUE} ELSE e.next_attempt_at END
  FROM placed
  WHERE e.id = placed.id
  RETURNING e.id, e.ordering_position AS position, placed.parked
`;

/** One event to sequence: its id, key and ordered handlers, and whether it may be parked. */
export interface SequencedEvent {
  id: string;
  key: string;
  orderedHandlers: readonly string[];
  /** Every handler of the event is ordered: with each held by an earlier event, none can run. */
  parkable: boolean;
}

/** SEQUENCE: see its parameters. */
export function sequenceParameters(events: readonly SequencedEvent[]): unknown[] {
  const pairEvents: number[] = [];
  const pairHandlers: string[] = [];
  events.forEach((event, index) => {
    for (const handler of event.orderedHandlers) {
      pairEvents.push(index + 1);
      pairHandlers.push(handler);
    }
  });
  return [
    events.map((e) => e.id),
    events.map((e) => e.key),
    events.map((e) => e.parkable),
    pairEvents,
    pairHandlers,
  ];
}
