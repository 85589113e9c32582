import { performance } from 'node:perf_hooks';
import { Client, Pool } from 'pg';

/**
 * The reference relay the module is measured against: one
 * `UPDATE ... FROM (SELECT ... LIMIT 100 FOR UPDATE SKIP LOCKED) RETURNING` claim, a no-op
 * handler, one `UPDATE ... WHERE id = ANY($1)` settle per batch, on a pool of 2 connections.
 */

export const REFERENCE_CHANNEL = 'outbox_event';

export const REFERENCE_CLAIM = `
  UPDATE outbox_event AS e
  SET attempts = e.attempts + 1, lease_expires_at = now() + interval '60 seconds'
  FROM (
    SELECT id FROM outbox_event
    WHERE dispatched_at IS NULL AND dead_at IS NULL AND next_attempt_at <= now()
      AND (lease_expires_at IS NULL OR lease_expires_at <= now())
    ORDER BY next_attempt_at, id
    LIMIT 100
    FOR UPDATE SKIP LOCKED
  ) AS due
  WHERE e.id = due.id
  RETURNING e.id, e.type, e.payload, e.attempts`;
const REFERENCE_SETTLE = `UPDATE outbox_event SET dispatched_at = now(), lease_expires_at = NULL WHERE id = ANY($1::uuid[])`;

export function referencePool(url: string, applicationName = 'bench-reference'): Pool {
  return new Pool({ connectionString: url, max: 2, application_name: applicationName });
}

/** Claim, no-op handler, settle, until a claim comes back empty. Returns the events settled. */
export async function referenceDrain(pool: Pool, onEvent: (id: string) => void): Promise<number> {
  let total = 0;
  for (;;) {
    const { rows } = await pool.query<{ id: string }>(REFERENCE_CLAIM);
    if (rows.length === 0) return total;
    for (const row of rows) onEvent(row.id);
    await pool.query(REFERENCE_SETTLE, [rows.map((r) => r.id)]);
    total += rows.length;
  }
}

/** Burn-down of what is in the table, in events/s from the first claim to the last settle. */
export async function referenceBurnDown(url: string): Promise<{ events: number; rate: number }> {
  const pool = referencePool(url);
  try {
    const started = performance.now();
    const events = await referenceDrain(pool, () => undefined);
    return { events, rate: events / ((performance.now() - started) / 1000) };
  } finally {
    await pool.end();
  }
}

/** The reference relay woken by NOTIFY: drains until empty on every notification. */
export async function startReferenceListener(
  url: string,
  onEvent: (id: string) => void,
): Promise<() => Promise<void>> {
  const pool = referencePool(url);
  const listener = new Client({ connectionString: url, application_name: 'bench-reference' });
  await listener.connect();
  let draining: Promise<void> | undefined;
  let again = false;
  const drain = (): void => {
    if (draining) {
      again = true;
      return;
    }
    draining = referenceDrain(pool, onEvent)
      .then(() => undefined)
      .finally(() => {
        draining = undefined;
        if (again) {
          again = false;
          drain();
        }
      });
  };
  listener.on('notification', drain);
  await listener.query(`LISTEN ${REFERENCE_CHANNEL}`);
  return async () => {
    await listener.end();
    await draining;
    await pool.end();
  };
}
