import { Client } from 'pg';

/** Waits until a session of the database runs a statement matching `pattern` and waits on a lock. */
export async function waitForLockWait(sql: Client, pattern: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const { rows } = await sql.query(
      `SELECT 1 FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE $1`,
      [pattern],
    );
    if (rows.length > 0) return;
    if (Date.now() > deadline) throw new Error(`no session waits on a lock for ${pattern}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export async function insertEvent(client: Client, type: string): Promise<void> {
  await client.query(
    `INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload, organization_id)
     VALUES (gen_random_uuid(), $1, 'a', '1', '{}', 'org')`,
    [type],
  );
}

/**
 * Whether emits commit while `build` (a migration run that builds `index` on outbox_event) waits
 * for a transaction older than it: true for `CREATE INDEX CONCURRENTLY`, whose lock lets writes
 * through; false for a plain `CREATE INDEX`, whose lock request makes every later write queue
 * behind it. The build completes either way once the older transaction commits.
 */
export async function emitsGoOnDuring(
  url: string,
  index: string,
  build: () => Promise<unknown>,
): Promise<boolean> {
  const older = new Client({ connectionString: url });
  const emitter = new Client({ connectionString: url });
  const observer = new Client({ connectionString: url });
  await Promise.all([older.connect(), emitter.connect(), observer.connect()]);
  try {
    await older.query('BEGIN');
    await insertEvent(older, 'older.transaction');
    const running = build();
    // Seen by the test even if it fails while the older transaction is still open.
    running.catch(() => undefined);
    await waitForLockWait(observer, `%${index}%`);
    await emitter.query(`SET lock_timeout = '1s'`);
    let wentOn = true;
    try {
      await insertEvent(emitter, 'during.build');
    } catch (error) {
      if (!/lock timeout/.test((error as Error).message)) throw error;
      wentOn = false;
    }
    await older.query('COMMIT');
    await running;
    return wentOn;
  } finally {
    await Promise.all([older.end(), emitter.end(), observer.end()]);
  }
}
