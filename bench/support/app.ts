import type { DynamicModule, INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { OUTBOX_ENTITIES, OutboxModule, type OutboxModuleOptions } from '../../libs/outbox/src';
import { OUTBOX_OPTIONS } from './config';
import { HANDLERS, type HandlerKind } from './handlers';

export interface AppOptions {
  /** The handler provider; none when null (a relay or an inbox brings its own). */
  handler: HandlerKind | null;
  /** More modules: a relay, an inbox. */
  imports?: DynamicModule[];
  /** Start the engine at bootstrap. */
  autoStart: boolean;
  /** Module options on top of BENCH_OUTBOX_OPTIONS (they win). */
  outbox?: OutboxModuleOptions;
  /** application_name of the DataSource's connections. */
  applicationName?: string;
  /** Pool size of the DataSource (pg's default is 10). */
  poolSize?: number;
  /** No log at all: for failures a scenario causes on purpose. */
  quiet?: boolean;
}

/**
 * The real module on a TypeORM DataSource, one handler provider, retention off. The DataSource
 * sets a connect timeout, as the outbox asks of production apps.
 */
export async function createOutboxApp(url: string, options: AppOptions): Promise<INestApplication> {
  const outbox = {
    ...OUTBOX_OPTIONS,
    ...options.outbox,
    tuning: { ...OUTBOX_OPTIONS.tuning, ...options.outbox?.tuning },
    autoStart: options.autoStart,
    retention: { enabled: false },
  } as OutboxModuleOptions;
  const moduleRef = await Test.createTestingModule({
    imports: [
      TypeOrmModule.forRoot({
        type: 'postgres',
        url,
        entities: [...OUTBOX_ENTITIES],
        logging: false,
        connectTimeoutMS: 5000,
        extra: {
          application_name: options.applicationName ?? 'bench-outbox',
          ...(options.poolSize ? { max: options.poolSize } : {}),
        },
      }),
      OutboxModule.forRoot(outbox),
      ...(options.imports ?? []),
    ],
    providers: options.handler ? [HANDLERS[options.handler]] : [],
  }).compile();
  const app = moduleRef.createNestApplication({
    logger: options.quiet ? false : ['error', 'warn'],
  });
  await app.init();
  return app;
}

/** The boot failed because this version of the module does not know `option`. */
export function isUnknownOption(error: unknown, option: string): boolean {
  const text = error instanceof Error ? `${error.name} ${error.message}` : String(error);
  return text.includes(option);
}
