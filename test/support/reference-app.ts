import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { AppModule, type AppModuleOptions } from '../../apps/reference/src/app.module';
import { configureApp } from '../../apps/reference/src/app.setup';
import { randomBytes } from 'node:crypto';
import { GuardedLogger, plantSecret } from './log-guard';
import { initOrClose } from './outbox-app';

/** This test file's operator token; planted, so no log line may hold it. */
export const OPERATOR_TOKEN = plantSecret(`operator-${randomBytes(24).toString('base64url')}`);

/** The `Authorization` header of the operator routes. */
export const OPERATOR = { authorization: `Bearer ${OPERATOR_TOKEN}` } as const;

/**
 * The reference app on a test database, initialised (migrations applied, dispatcher running)
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
