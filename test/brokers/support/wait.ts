import type { Client } from 'pg';

/** Polls `sql` (one row, one column `n`) until it reads `expected`; fails after `timeoutMs`. */
export async function waitForRows(
  sql: Client,
  query: string,
  expected: number,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: number | undefined;
  while (Date.now() < deadline) {
    last = (await sql.query<{ n: number }>(query)).rows[0].n;
    if (last === expected) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`waited ${timeoutMs} ms for ${expected}, last read ${last}: ${query}`);
}

/**
 * Polls `condition` until it holds or `timeoutMs` passes, and returns either way: the assertion
 * after it says what was wrong, rather than a timeout.
 */
export async function pollUntil(
  condition: () => boolean | Promise<boolean>,
  timeoutMs: number,
  intervalMs = 100,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition()) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
