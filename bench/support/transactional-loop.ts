import { performance } from 'node:perf_hooks';
import { Pool, type PoolClient } from 'pg';
import { REFERENCE_CLAIM } from './reference-relay';

/**
 * A transactional handler written by hand, the floor the module's is measured against: claim up
 * to 100 due events as the reference relay does, then run each in a transaction of its own on one of `connections` pool
 * connections (`BEGIN`; the handler's `INSERT`; the delivery recorded in the event's row,
 * guarded by the claimed attempt; `COMMIT`: four round trips), then mark the batch dispatched.
 */
const INSERT_EFFECT = 'INSERT INTO bench_effect (event_id) VALUES ($1)';
const RECORD_DELIVERY = `
  UPDATE outbox_event
  SET deliveries = jsonb_build_object('tx-effect', clock_timestamp()) || deliveries
  WHERE id = $1 AND attempts = $2 AND dispatched_at IS NULL AND lease_expires_at IS NOT NULL
  RETURNING id`;
const SETTLE = `
  UPDATE outbox_event SET dispatched_at = now(), lease_expires_at = NULL
  WHERE id = ANY($1::uuid[])`;

async function runOne(client: PoolClient, event: { id: string; attempts: number }) {
  await client.query('BEGIN');
  try {
    await client.query(INSERT_EFFECT, [event.id]);
    const { rowCount } = await client.query(RECORD_DELIVERY, [event.id, event.attempts]);
    if (rowCount !== 1) throw new Error(`lease lost for ${event.id}`);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  }
}

/** Burn-down of what is in the table through the hand-written loop, in events/s. */
export async function transactionalLoopBurnDown(
  url: string,
  connections: number,
): Promise<{ events: number; rate: number }> {
  const pool = new Pool({ connectionString: url, max: connections + 1 });
  const clients = await Promise.all(Array.from({ length: connections }, () => pool.connect()));
  try {
    const started = performance.now();
    let events = 0;
    for (;;) {
      const { rows } = await pool.query<{ id: string; attempts: number }>(REFERENCE_CLAIM);
      if (rows.length === 0) break;
      let next = 0;
      await Promise.all(
        clients.map(async (client) => {
          while (next < rows.length) await runOne(client, rows[next++]);
        }),
      );
      await pool.query(SETTLE, [rows.map((row) => row.id)]);
      events += rows.length;
    }
    return { events, rate: events / ((performance.now() - started) / 1000) };
  } finally {
    for (const client of clients) client.release();
    await pool.end();
  }
}
