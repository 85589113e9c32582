import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Client } from 'pg';
import { AppModule, type AppModuleOptions } from '../../apps/reference/src/app.module';
import { configureApp } from '../../apps/reference/src/app.setup';
import { randomBytes } from 'node:crypto';
import { GuardedLogger, plantSecret } from './log-guard';
import { initOrClose } from './outbox-app';
import { useTestApp, type TestAppFixture, type TestDatabaseFixtureOptions } from './test-database';

/** This test file's operator token; planted, so no log line may hold it. */
export const OPERATOR_TOKEN = plantSecret(`operator-${randomBytes(24).toString('base64url')}`);

/** The `Authorization` header of the operator routes. */
export const OPERATOR = { authorization: `Bearer ${OPERATOR_TOKEN}` } as const;

/**
 * The reference app on a test database, initialised (migrations applied, engine running)
 * but not listening; use `supertest(app.getHttpServer())`. `env` overrides the test defaults,
 * which keep retries and polls short.
 */
export async function createReferenceApp(
  url: string,
  env: Record<string, string | undefined> = {},
  options: Omit<AppModuleOptions, 'env'> = {},
): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      AppModule.forRoot({
        env: {
          DATABASE_URL: url,
          OPERATOR_TOKEN,
          OUTBOX_POLL_INTERVAL_MS: '1000',
          OUTBOX_SHUTDOWN_GRACE_MS: '2000',
          WEBHOOK_RETRY_SCHEDULE_MS: '50,50,50,50,50,50,50',
          WEBHOOK_TIMEOUT_MS: '2000',
          ...env,
        },
        ...options,
      }),
    ],
  }).compile();
  // Logging on, into the guard: the tests prove that no secret they planted is ever logged.
  const app = configureApp(moduleRef.createNestApplication({ logger: new GuardedLogger() }));
  return initOrClose(app);
}

/**
 * The file's database and the reference app on it (`createReferenceApp` with `env` and
 * `options`), made before the tests of the file or describe block and closed after them. Read
 * the fields inside tests and hooks.
 */
export function useReferenceApp(
  env: Record<string, string | undefined> = {},
  options: Omit<AppModuleOptions, 'env'> = {},
  fixture?: TestDatabaseFixtureOptions,
): TestAppFixture<INestApplication> {
  return useTestApp((db) => createReferenceApp(db.url, env, options), fixture);
}

/** The tables the reference app's domain writes, with the outbox's. */
export const DOMAIN_TABLES = [
  'organization',
  'member',
  'invoice',
  'webhook_endpoint',
  'outbox_event',
];

/** How many rows each of `tables` holds, by table. */
export async function rowCounts(
  sql: Client,
  tables: readonly string[] = DOMAIN_TABLES,
): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of tables) {
    const { rows } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
    counts[table] = rows[0].n;
  }
  return counts;
}
