import type { Client } from 'pg';

/**
 * Makes already-delivered events look undelivered and due, as a lost settle or an operator's
 * replay would: every handler runs again on the next drain. Returns how many rows it touched.
 */
export async function forceRedelivery(sql: Client, eventIds?: readonly string[]): Promise<number> {
  const { rowCount } = await sql.query(
    `UPDATE outbox_event
     SET deliveries = '{}', dispatched_at = NULL, dead_at = NULL, lease_expires_at = NULL,
         next_attempt_at = now()
     WHERE dispatched_at IS NOT NULL AND ($1::uuid[] IS NULL OR id = ANY ($1::uuid[]))`,
    [eventIds ?? null],
  );
  await sql.query(`NOTIFY outbox_event`);
  return rowCount ?? 0;
}

/** Waits until no event is left undelivered (live or leased); dead ones do not count. */
export async function waitUntilDelivered(sql: Client): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const { rows } = await sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM outbox_event WHERE dispatched_at IS NULL AND dead_at IS NULL`,
    );
    if (rows[0].n === 0) return;
    if (Date.now() > deadline) throw new Error(`${rows[0].n} events still undelivered after 20 s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
