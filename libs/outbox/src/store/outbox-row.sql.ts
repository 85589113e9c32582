/**
 * What every statement on `outbox_event` shares: the row's states and the fragments more than one
 * store needs. Each statement is one statement (a store wraps its own in a short transaction
 * that sets their timeouts, see `runBounded`); times come from the database clock (`now()`),
 * never from the Node process. Batches travel as one JSON document expanded with
 * `jsonb_to_recordset`, so a statement's shape does not depend on batch size.
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

/** The due time of a row that only an operator's replay makes due again. */
export const NEVER_DUE = `timestamptz '9999-12-31 00:00:00+00'`;

/**
 * The columns a delivered event is left with, at time `at`: delivered, its lease over, its last
 * error cleared. Written by the completer's settle and by a transactional handler's record when
 * it is the event's last handler.
 */
export function deliveredAt(at: string): string {
  return `dispatched_at = ${at},
      lease_expires_at = NULL,
      last_error = NULL`;
}

/** `failures` of a row with every handler's retry time cleared. */
export function retryTimesCleared(failures: string): string {
  return `(SELECT coalesce(jsonb_object_agg(f.key, f.value || '{"retryAt": null}'::jsonb),
                           '{}'::jsonb)
            FROM jsonb_each(${failures}) AS f)`;
}
