import {
  Module,
  type DynamicModule,
  type MiddlewareConsumer,
  type NestModule,
} from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { ScheduleModule } from '@nestjs/schedule';
import { TypeOrmModule } from '@nestjs/typeorm';
import { OutboxModule, type OutboxModuleOptions } from '@app/outbox';
import { OutboxDashboardModule } from '@app/outbox/admin';
import { OUTBOX_MIGRATIONS, REFERENCE_APP_MIGRATIONS } from '../../../migrations';
import { AuditModule } from './audit/audit.module';
import { natsRelay } from './events/nats-relay';
import { AuthModule } from './auth/auth.module';
import { DashboardSessionGuard } from './auth/dashboard-session.guard';
import { requestIdMiddleware } from './common/request-id';
import { parseRetrySchedule, validateAppConfig, type AppConfig } from './config/app.config';
import { APP_ENTITIES } from './database/entities';
import { EventsModule } from './events/events.module';
import { HealthModule } from './health/health.module';
import { InvoicesModule } from './invoices/invoices.module';
import { NotificationsModule } from './notifications/notifications.module';
import { OrganizationsModule } from './organizations/organizations.module';
import { MetricsModule } from './metrics/metrics.module';
import { prometheusExporter } from './metrics/prometheus';
import { DASHBOARD_PATH } from './outbox-admin/dashboard-path';
import { OutboxAdminModule } from './outbox-admin/outbox-admin.module';
import { WEBHOOK_SENDER } from './webhooks/webhook-delivery';
import { WebhooksModule } from './webhooks/webhooks.module';

const HOUR = 3_600_000;

export interface AppModuleOptions {
  /** The environment to read; `process.env` when absent (tests pass their own). */
  env?: Record<string, string | undefined>;
  /**
   * Adjusts the outbox options read from the environment; tests pass `outboxTestingOptions`
   * (from `nestjs-lease-outbox/testing`) to deliver with `drainUntilIdle` instead of the loop.
   */
  outbox?: (options: OutboxModuleOptions) => OutboxModuleOptions;
}

/**
 * A small multi-tenant SaaS API: organizations, members and invoices emit outbox events; the
 * audit log, webhooks and notifications react to them, each in its own module.
 */
@Module({})
export class AppModule implements NestModule {
  static forRoot(options: AppModuleOptions = {}): DynamicModule {
    // Before OutboxModule is built, so the outbox reports to it.
    prometheusExporter();
    // Read once here too: which modules the app has depends on it (the NATS relay).
    const env = validateAppConfig(options.env ?? process.env);
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot({
          isGlobal: true,
          ignoreEnvFile: true,
          ignoreEnvVars: true,
          load: [() => ({ ...env })],
        }),
        TypeOrmModule.forRootAsync({
          inject: [ConfigService],
          useFactory: (config: ConfigService<AppConfig, true>) => {
            const url = config.get('DATABASE_URL', { infer: true });
            if (!url)
              throw new Error(
                'DATABASE_URL is not set (npm start sets it for the embedded database)',
              );
            return {
              type: 'postgres' as const,
              url,
              entities: APP_ENTITIES,
              migrations: [...OUTBOX_MIGRATIONS, ...REFERENCE_APP_MIGRATIONS],
              // TypeORM's default transaction mode ('all'): the outbox's migrations run in any.
              migrationsRun: true,
              logging: false,
              // A new connection to a database that stops answering must not wait forever.
              connectTimeoutMS: 5000,
              // Transactional handlers (audit-log, notification-fanout, webhook-fanout) hold a
              // connection each while they run; the outbox runs at most poolSize - 2 at once.
              poolSize: 30,
            };
          },
        }),
        ScheduleModule.forRoot(),
        OutboxModule.forRootAsync({
          inject: [ConfigService],
          useFactory: (config: ConfigService<AppConfig, true>) =>
            (options.outbox ?? ((read) => read))(outboxOptions(config)),
        }),
        EventsModule,
        ...natsRelay(env),
        AuthModule,
        OrganizationsModule,
        InvoicesModule,
        AuditModule,
        WebhooksModule,
        NotificationsModule,
        OutboxAdminModule,
        MetricsModule,
        OutboxDashboardModule.forRoot({ path: DASHBOARD_PATH, guard: DashboardSessionGuard }),
        HealthModule,
      ],
    };
  }

  configure(consumer: MiddlewareConsumer): void {
    consumer.apply(requestIdMiddleware).forRoutes('*path');
  }
}

/** The outbox options the environment gives. */
function outboxOptions(config: ConfigService<AppConfig, true>): OutboxModuleOptions {
  return {
    maxAttempts: config.get('OUTBOX_MAX_ATTEMPTS', { infer: true }),
    deadRetryMs: Math.round(config.get('OUTBOX_DEAD_RETRY_HOURS', { infer: true }) * HOUR),
    leaseMs: config.get('OUTBOX_LEASE_MS', { infer: true }),
    handlerTimeoutMs: config.get('OUTBOX_HANDLER_TIMEOUT_MS', { infer: true }),
    shutdownGraceMs: config.get('OUTBOX_SHUTDOWN_GRACE_MS', { infer: true }),
    tuning: { pollIntervalMs: config.get('OUTBOX_POLL_INTERVAL_MS', { infer: true }) },
    retention: {
      retentionMs: Math.round(config.get('OUTBOX_RETENTION_DAYS', { infer: true }) * 24 * HOUR),
    },
    handlers: {
      [WEBHOOK_SENDER]: {
        // The POST's own timeout, and a second more for the handler to report it.
        timeoutMs: config.get('WEBHOOK_TIMEOUT_MS', { infer: true }) + 1000,
        retry: parseRetrySchedule(config.get('WEBHOOK_RETRY_SCHEDULE_MS', { infer: true })),
      },
    },
  };
}
