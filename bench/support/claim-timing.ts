import { performance } from 'node:perf_hooks';
import type { Client } from 'pg';

/** A statement and its bound values. */
export interface Statement {
  text: string;
  values: unknown[];
}

/** `body` in a transaction that is rolled back, so a claim it runs leases nothing. */
export async function rolledBack<T>(sql: Client, body: () => Promise<T>): Promise<T> {
  await sql.query('BEGIN');
  try {
    return await body();
  } finally {
    await sql.query('ROLLBACK');
  }
}

/** How long `claim` takes to come back, in ms, run in a transaction rolled back. */
export async function timeClaim(sql: Client, claim: Statement): Promise<number> {
  return rolledBack(sql, async () => {
    const started = performance.now();
    await sql.query(claim.text, claim.values);
    return performance.now() - started;
  });
}
