import { QueryRunner } from 'typeorm';

/**
 * Builds an index with `CREATE INDEX CONCURRENTLY IF NOT EXISTS`, for a migration with
 * `transaction = false` (PostgreSQL refuses a concurrent build inside a transaction): writes go
 * on while it reads the table. Shared by released migrations: a change here changes them.
 *
 * A concurrent build that fails or is interrupted (a cancel, a timeout, a lost connection, a
 * deploy job killed) leaves its index behind, INVALID: never used by a query but kept up to date
 * by every write, and found by `IF NOT EXISTS`, which would then skip it forever. So an invalid
 * index of that name is dropped first, and a re-run after any failure completes. The migration
 * runner is the only one building it: run migrations from one place at a time, as a build in
 * progress is invalid too until it ends.
 *
 * No lock_timeout is set: the build's lock (SHARE UPDATE EXCLUSIVE) never makes emits or settles
 * wait, only other schema changes and vacuums of the table, and the build then waits for the
 * transactions older than it to end, which holds nobody up. A lock_timeout or statement_timeout
 * the connection carries may still end it: that leaves an invalid index, rebuilt by the next run.
 */
export async function createIndexConcurrently(
  queryRunner: QueryRunner,
  name: string,
  definition: string,
): Promise<void> {
  await dropIndexIfInvalid(queryRunner, name);
  await queryRunner.query(`CREATE INDEX CONCURRENTLY IF NOT EXISTS ${name} ${definition}`);
}

/** Drops an index without making writes wait, outside a transaction. */
export async function dropIndexConcurrently(queryRunner: QueryRunner, name: string): Promise<void> {
  await queryRunner.query(`DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
}

/**
 * For `down()`: TypeORM's revert (`migration:revert`, `undoLastMigration`) runs it in a
 * transaction whatever the migration's `transaction`, unless told `transaction: 'none'`. There
 * the index is built plainly, holding writes while it reads the table; outside, concurrently.
 */
export async function createIndexOnRevert(
  queryRunner: QueryRunner,
  name: string,
  definition: string,
): Promise<void> {
  if (!queryRunner.isTransactionActive)
    return createIndexConcurrently(queryRunner, name, definition);
  await dropIndexIfInvalid(queryRunner, name);
  await queryRunner.query(`CREATE INDEX IF NOT EXISTS ${name} ${definition}`);
}

/** For `down()`, as `createIndexOnRevert`: concurrently unless in the revert's transaction. */
export async function dropIndexOnRevert(queryRunner: QueryRunner, name: string): Promise<void> {
  if (!queryRunner.isTransactionActive) return dropIndexConcurrently(queryRunner, name);
  await queryRunner.query(`DROP INDEX IF EXISTS ${name}`);
}

async function dropIndexIfInvalid(queryRunner: QueryRunner, name: string): Promise<void> {
  // to_regclass: the index the unqualified name finds on the search_path, as the build's would.
  const rows = (await queryRunner.query(
    `SELECT NOT i.indisvalid AS invalid FROM pg_index AS i WHERE i.indexrelid = to_regclass($1)`,
    [name],
  )) as { invalid: boolean }[];
  if (rows[0]?.invalid) await dropIndexOnRevert(queryRunner, name);
}
