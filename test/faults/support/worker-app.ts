import {
  Controller,
  Get,
  Module,
  type DynamicModule,
  type INestApplicationContext,
  type LogLevel,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Pool } from 'pg';
import {
  OUTBOX_ENTITIES,
  OutboxHealthIndicator,
  OutboxLivenessIndicator,
  OutboxModule,
} from '@app/outbox';
import { FAULT_CONFIG, FAULT_RECORDS, FaultHandlers } from './fault-handlers';
import type { ChildConfig } from './ipc';

/**
 * Loaded only for a scenario with a broker: the previous release, which runs this worker too
 * (mixed-versions), has no `bridge` entry to import.
 */
function loadBridgeModules(bridge: NonNullable<ChildConfig['bridge']>): DynamicModule[] {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { bridgeModules } = require('./bridge-modules') as typeof import('./bridge-modules');
  return bridgeModules(bridge);
}

/** Backends of the outbox's own connections carry this name; the producer's do not. */
export const WORKER_APPLICATION_NAME = 'faults-worker';
export const PRODUCER_APPLICATION_NAME = 'faults-producer';
export const RECORDS_APPLICATION_NAME = 'faults-records';

/** A pod's probes, as the README shows them: readiness at `/health`, liveness at `/health/live`. */
@Controller('health')
class FaultHealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly outbox: OutboxHealthIndicator,
    private readonly liveness: OutboxLivenessIndicator,
  ) {}

  @Get()
  @HealthCheck()
  ready() {
    return this.health.check([() => this.outbox.isHealthy('outbox', { timeoutMs: 1000 })]);
  }

  @Get('live')
  @HealthCheck()
  live() {
    return this.health.check([() => this.liveness.isAlive('outbox')]);
  }
}

@Module({})
class FaultAppModule {
  /** TypeORM and the real `OutboxModule.forRoot`, as an application would import them. */
  static for(config: ChildConfig, records: Pool | undefined): DynamicModule {
    const worker = config.role === 'worker';
    return {
      module: FaultAppModule,
      imports: [
        TypeOrmModule.forRoot({
          type: 'postgres',
          url: config.url,
          entities: [...OUTBOX_ENTITIES],
          synchronize: false,
          logging: false,
          applicationName: worker ? WORKER_APPLICATION_NAME : PRODUCER_APPLICATION_NAME,
          poolSize: 10,
          // As the README recommends: a connection to a frozen server must not wait forever.
          connectTimeoutMS: 2000,
          // A worker restarted while the server is down keeps trying rather than exiting.
          retryAttempts: 30,
          retryDelay: 500,
          ...(config.queryTimeoutMs === undefined
            ? {}
            : { extra: { query_timeout: config.queryTimeoutMs, maxLifetimeSeconds: 1 } }),
        }),
        OutboxModule.forRoot(
          worker ? config.outbox : { autoStart: false, listen: { enabled: false } },
        ),
        ...(config.httpPort === undefined ? [] : [TerminusModule.forRoot({ logger: false })]),
        ...(worker && config.bridge ? loadBridgeModules(config.bridge) : []),
      ],
      controllers: config.httpPort === undefined ? [] : [FaultHealthController],
      // The producer registers the handlers too, never running them (its dispatcher is off):
      // an emit sequences the events of ordered handlers only when its own app has them.
      providers: [
        FaultHandlers,
        { provide: FAULT_RECORDS, useValue: records ?? null },
        { provide: FAULT_CONFIG, useValue: config },
      ],
    };
  }
}

export interface FaultApp {
  app: INestApplicationContext;
  records: Pool | undefined;
}

/**
 * Warnings and errors only: the runner keeps them to explain failures and count timeouts. With
 * `httpPort`, an HTTP application listening there (its server closes with `app.close()`).
 */
export async function createFaultApp(config: ChildConfig): Promise<FaultApp> {
  const records =
    config.role === 'worker'
      ? new Pool({
          connectionString: config.recordUrl,
          application_name: RECORDS_APPLICATION_NAME,
          max: 40,
        })
      : undefined;
  // A pooled client the server terminates while idle reports it here; the pool replaces it.
  records?.on('error', () => undefined);
  const module = FaultAppModule.for(config, records);
  const options = { logger: ['error', 'warn'] as LogLevel[], abortOnError: false };
  if (config.httpPort === undefined) {
    return { app: await NestFactory.createApplicationContext(module, options), records };
  }
  // The runner's probes keep their connection alive, and Node's `server.close()` waits for a
  // connection that keeps bringing requests: without this, a stopping pod's close could wait on
  // its own probes until the kill (the kubelet's probes keep no connection).
  const app = await NestFactory.create(module, { ...options, forceCloseConnections: true });
  await app.listen(config.httpPort, '127.0.0.1');
  return { app, records };
}
