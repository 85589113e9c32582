import { Pool, type QueryResultRow } from 'pg';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { withAdminClient } from '../../support/admin-client';
import { createTemplateDatabase } from '../../support/template-database';
import type { PgServer } from './pg-server';

const TEMPLATE = 'faults_template';

/** The suite's own record of what happened, next to the outbox table. */
const FAULT_TABLES = `
  CREATE TABLE fault_emitted (
    event_id uuid PRIMARY KEY,
    kind text NOT NULL,
    emitted_at timestamptz NOT NULL DEFAULT clock_timestamp()
  );
  CREATE TABLE fault_call (
    id bigserial PRIMARY KEY,
    handler text NOT NULL,
    event_id uuid NOT NULL,
    pid integer NOT NULL,
    attempt integer NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- 'done': this call wrote the effect; 'repeat': an earlier call had; 'failed': it threw on
    -- purpose; null: never got there.
    effect text,
    -- When the call wrote its effect or failed; null for a call cut short.
    ended_at timestamptz
  );
  CREATE INDEX fault_call_pair_idx ON fault_call (handler, event_id);
  -- No unique key on purpose: a second row for a pair is the duplicate effect the suite counts.
  CREATE TABLE fault_effect (
    id bigserial PRIMARY KEY,
    handler text NOT NULL,
    event_id uuid NOT NULL,
    call_id bigint NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
  );
  CREATE INDEX fault_effect_pair_idx ON fault_effect (handler, event_id);
`;

/** Migrates the outbox once into a template; every scenario then gets a fresh copy. */
export async function createFaultTemplate(server: PgServer): Promise<void> {
  await createTemplateDatabase(server.url(), TEMPLATE);
}

/** A scenario's database: the runner's pool, with retries across server restarts. */
export interface FaultDatabase {
  name: string;
  url: string;
  query<R extends QueryResultRow = Record<string, any>>(
    sql: string,
    params?: unknown[],
  ): Promise<R[]>;
  close(): Promise<void>;
}

/**
 * A scenario's database, a copy of the template (the outbox migrated to this tree's schema), or,
 * with `migrations`, an empty database brought up by those (an older release's schema).
 */
export async function createFaultDatabase(
  server: PgServer,
  name: string,
  options: { migrations?: MigrationList } = {},
): Promise<FaultDatabase> {
  const template = options.migrations ? 'template0' : TEMPLATE;
  await withAdminClient(server.url(), async (client) => {
    await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(name)} WITH (FORCE)`);
    await client.query(
      `CREATE DATABASE ${client.escapeIdentifier(name)} TEMPLATE ${client.escapeIdentifier(template)}`,
    );
  });
  const url = server.url(name);
  if (options.migrations) await migrate(url, options.migrations);
  const db = openFaultDatabase(name, url);
  await db.query(FAULT_TABLES);
  return db;
}

/** The runner's pool on a scenario's database that exists already (a standby's copy of one). */
export function openFaultDatabase(name: string, url: string): FaultDatabase {
  const pool = new Pool({ connectionString: url, max: 4, application_name: 'faults-runner' });
  // Idle connections die with every server restart; the pool replaces them.
  pool.on('error', () => undefined);
  return {
    name,
    url,
    async query<R extends QueryResultRow>(sql: string, params: unknown[] = []) {
      // A statement can meet a connection the last restart killed; a few tries get a live one.
      for (let attempt = 1; ; attempt++) {
        try {
          return (await pool.query<R>(sql, params)).rows;
        } catch (error) {
          if (attempt >= 20 || !isConnectionError(error)) throw error;
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      }
    },
    close: () => pool.end(),
  };
}

function isConnectionError(error: unknown): boolean {
  const code = (error as { code?: string }).code ?? '';
  const message = error instanceof Error ? error.message : String(error);
  return (
    code.startsWith('08') ||
    code === '57P01' ||
    code === '57P03' ||
    code === 'ECONNREFUSED' ||
    code === 'ECONNRESET' ||
    /terminat|Connection terminated|ECONNREFUSED|ECONNRESET|shutting down|starting up/i.test(
      message,
    )
  );
}

export type MigrationList = NonNullable<DataSourceOptions['migrations']>;

/** Runs `migrations` on the database at `url` (those it already ran are skipped), each in its own transaction. */
export async function migrate(url: string, migrations: MigrationList): Promise<string[]> {
  const dataSource = new DataSource({ type: 'postgres', url, migrations, logging: false });
  await dataSource.initialize();
  try {
    const ran = await dataSource.runMigrations({ transaction: 'each' });
    return ran.map((migration) => migration.name);
  } finally {
    await dataSource.destroy();
  }
}
