import { Client } from 'pg';

/**
 * Runs `work` on a short-lived connection to the admin database. CREATE/DROP DATABASE cannot
 * run inside a transaction or against the database they act on, so they get their own session
 * rather than borrowing a pooled TypeORM connection.
 */
export async function withAdminClient<T>(
  adminUrl: string,
  work: (client: Client) => Promise<T>,
): Promise<T> {
  const client = new Client({ connectionString: adminUrl, application_name: 'outbox-test-admin' });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** Drops `name` even when a crashed test left sessions on it (WITH (FORCE) needs PostgreSQL 13+). */
export async function dropDatabase(client: Client, name: string): Promise<void> {
  await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)} WITH (FORCE)`);
}
