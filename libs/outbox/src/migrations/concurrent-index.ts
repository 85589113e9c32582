import { QueryRunner } from 'typeorm';

/**
 * Index builds of the outbox's migrations, in whatever transaction mode the app's TypeORM runs
 * them. Shared by released migrations: a change here changes them.
 *
 * - Inside a transaction (TypeORM's default mode 'all', or 'each'), a plain `CREATE INDEX`:
 *   PostgreSQL refuses a concurrent build there. It holds the table's writes while it reads the
 *   table, which a new or small table never notices.
 * - Outside one (mode 'none', `outboxMigrations({ concurrentIndexes: true })`, or the package's
 *   `nestjs-lease-outbox migrate`), `CREATE INDEX CONCURRENTLY`: writes go on while it reads the
 *   table, for a big table in production.
 *
 * A concurrent build that fails or is interrupted (a cancel, a timeout, a lost connection, a
 * deploy job killed) leaves its index behind, INVALID: never used by a query but kept up to date
 * by every write, and found by `IF NOT EXISTS`, which would then skip it forever. So an invalid
 * index of that name is dropped first, and a re-run after any failure completes. The migration
 * runner is the only one building it: run migrations from one place at a time, as a build in
 * progress is invalid too until it ends.
 *
 * No lock_timeout is set: a concurrent build's lock (SHARE UPDATE EXCLUSIVE) never makes emits or
 * settles wait, only other schema changes and vacuums of the table, and the build then waits for
 * the transactions older than it to end, which holds nobody up. A lock_timeout or
 * statement_timeout the connection carries may still end it: that leaves an invalid index,
 * rebuilt by the next run.
 */
export async function createIndex(
  queryRunner: QueryRunner,
  name: string,
  definition: string,
): Promise<void> {
  await dropIndexIfInvalid(queryRunner, name);
  const concurrently = queryRunner.isTransactionActive ? '' : 'CONCURRENTLY ';
  await queryRunner.query(`CREATE INDEX ${concurrently}IF NOT EXISTS ${name} ${definition}`);
}

/** Drops an index: concurrently (without making writes wait) unless inside a transaction. */
export async function dropIndex(queryRunner: QueryRunner, name: string): Promise<void> {
  const concurrently = queryRunner.isTransactionActive ? '' : 'CONCURRENTLY ';
  await queryRunner.query(`DROP INDEX ${concurrently}IF EXISTS ${name}`);
}

async function dropIndexIfInvalid(queryRunner: QueryRunner, name: string): Promise<void> {
  // to_regclass: the index the unqualified name finds on the search_path, as the build's would.
  const rows = (await queryRunner.query(
    `SELECT NOT i.indisvalid AS invalid FROM pg_index AS i WHERE i.indexrelid = to_regclass($1)`,
    [name],
  )) as { invalid: boolean }[];
  if (rows[0]?.invalid) await dropIndex(queryRunner, name);
}
