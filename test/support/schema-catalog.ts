import type { DataSource, EntityTarget } from 'typeorm';

/** Index or constraint name → definition text as PostgreSQL prints it. */
export type Definitions = Record<string, string>;

/**
 * The table's secondary indexes, as pg_get_indexdef prints them. The schema qualifier is
 * dropped so the text does not depend on which schema the test database uses.
 */
export async function migratedIndexes(runner: Queryable, table: string): Promise<Definitions> {
  const rows = await runner.query<{ name: string; definition: string }[]>(
    `SELECT i.relname AS name, pg_get_indexdef(i.oid) AS definition
       FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
      WHERE x.indrelid = $1::regclass AND NOT x.indisprimary
      ORDER BY i.relname`,
    [table],
  );
  return Object.fromEntries(rows.map(({ name, definition }) => [name, unqualify(definition)]));
}

/** The table's CHECK constraints, as pg_get_constraintdef prints them. */
export async function migratedChecks(runner: Queryable, table: string): Promise<Definitions> {
  const rows = await runner.query<{ name: string; definition: string }[]>(
    `SELECT conname AS name, pg_get_constraintdef(oid) AS definition
       FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'c'
      ORDER BY conname`,
    [table],
  );
  return Object.fromEntries(rows.map(({ name, definition }) => [name, definition]));
}

/**
 * What the entity's @Index and @Check declarations become once PostgreSQL has parsed them.
 * TypeORM's schema diff matches indexes by name, uniqueness and column set, and checks by
 * name only, so a drifted WHERE clause, column order or CHECK expression would pass it.
 * Building each declaration for real, inside a transaction that is rolled back, lets
 * PostgreSQL's own deparser put both sides in the same canonical text.
 */
export async function entityDeclarations(
  dataSource: DataSource,
  entity: EntityTarget<unknown>,
): Promise<{ indexes: Definitions; checks: Definitions; unsynchronized: string[] }> {
  const metadata = dataSource.getMetadata(entity);
  const table = metadata.tableName;
  // One runner, so every statement shares the transaction that is rolled back at the end.
  const runner = dataSource.createQueryRunner();
  await runner.startTransaction();
  try {
    const indexes: Definitions = {};
    // Declared by name only (`synchronize: false`): TypeORM leaves the migration's index alone.
    const unsynchronized: string[] = [];
    for (const [position, index] of metadata.indices.entries()) {
      if (!index.synchronize) {
        unsynchronized.push(index.name);
        continue;
      }
      const scratch = `entity_index_${position}`;
      const columns = index.columns.map((column) => quote(column.databaseName)).join(', ');
      await runner.query(
        `CREATE ${index.isUnique ? 'UNIQUE ' : ''}INDEX ${scratch} ON ${quote(table)} (${columns})` +
          (index.where ? ` WHERE ${index.where}` : ''),
      );
      const [{ definition }] = await dataSource.query<{ definition: string }[]>(
        'SELECT pg_get_indexdef($1::regclass) AS definition',
        [scratch],
        runner,
      );
      indexes[index.name] = unqualify(definition).replace(scratch, index.name);
    }

    const checks: Definitions = {};
    for (const [position, check] of metadata.checks.entries()) {
      const scratch = `entity_check_${position}`;
      // NOT VALID: only the expression matters here, not whether existing rows satisfy it.
      await runner.query(
        `ALTER TABLE ${quote(table)} ADD CONSTRAINT ${scratch} CHECK (${check.expression}) NOT VALID`,
      );
      const [{ definition }] = await dataSource.query<{ definition: string }[]>(
        `SELECT pg_get_constraintdef(oid) AS definition FROM pg_constraint
          WHERE conrelid = $1::regclass AND conname = $2`,
        [table, scratch],
        runner,
      );
      checks[check.name] = definition.replace(/ NOT VALID$/, '');
    }
    return { indexes, checks, unsynchronized };
  } finally {
    await runner.rollbackTransaction();
    await runner.release();
  }
}

interface Queryable {
  query<T>(sql: string, parameters?: unknown[]): Promise<T>;
}

function unqualify(indexDefinition: string): string {
  return indexDefinition.replace(/ ON (?:"[^"]+"|\w+)\./, ' ON ');
}

function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}
