import { Module, type DynamicModule, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Pool } from 'pg';
import { OUTBOX_ENTITIES, OutboxModule } from '@app/outbox';
import { FAULT_CONFIG, FAULT_RECORDS, FaultHandlers } from './fault-handlers';
import type { ChildConfig } from './ipc';

/** Backends of the outbox's own connections carry this name; the producer's do not. */
export const WORKER_APPLICATION_NAME = 'faults-worker';
export const PRODUCER_APPLICATION_NAME = 'faults-producer';
export const RECORDS_APPLICATION_NAME = 'faults-records';

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
        }),
        OutboxModule.forRoot(
          worker ? config.outbox : { autoStart: false, listen: { enabled: false } },
        ),
      ],
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

/** Warnings and errors only: the runner keeps them to explain failures and count timeouts. */
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
  const app = await NestFactory.createApplicationContext(FaultAppModule.for(config, records), {
    logger: ['error', 'warn'],
    abortOnError: false,
  });
  return { app, records };
}
