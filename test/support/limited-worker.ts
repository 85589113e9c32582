/**
 * One worker process of the handler-limit tests: a Nest app with the outbox and one limited
 * handler, `limited`, on events of type `limited.call`. Each run writes its start and end to
 * `limit_run` by the database clock, then sleeps `sleepMs`. Configured by the JSON in
 * LIMITED_WORKER; prints `ready` once its engine runs and closes the app on SIGTERM.
 */
import 'reflect-metadata';
import { Injectable, Module, type DynamicModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { Pool } from 'pg';
import {
  OUTBOX_ENTITIES,
  OnOutboxEvent,
  OutboxModule,
  type HandlerContext,
  type OnOutboxEventOptions,
  type OutboxEvent,
} from '@app/outbox';

export interface LimitedWorkerConfig {
  url: string;
  /** The server itself, for the LISTEN connection (the url may go through a pooler). */
  directUrl: string;
  /** The handler's limit: `maxConcurrent`, `rate`, `limitPerPartition`. */
  limit: Pick<OnOutboxEventOptions, 'maxConcurrent' | 'rate' | 'limitPerPartition'>;
  sleepMs: number;
  concurrency: number;
}

const config = JSON.parse(process.env.LIMITED_WORKER ?? '{}') as LimitedWorkerConfig;
const runs = new Pool({ connectionString: config.url, max: 4 });

@Injectable()
class LimitedHandler {
  @OnOutboxEvent('limited', { events: ['limited.call'], ...config.limit })
  async handle(event: OutboxEvent, ctx: HandlerContext) {
    const { rows } = await runs.query<{ id: string }>(
      `INSERT INTO limit_run (event_id, partition_key, pid, attempt, started_at)
       VALUES ($1, $2, $3, $4, clock_timestamp()) RETURNING id`,
      [event.id, event.organizationId ?? '', process.pid, ctx.attempt],
    );
    await new Promise((resolve) => setTimeout(resolve, config.sleepMs));
    await runs.query(`UPDATE limit_run SET ended_at = clock_timestamp() WHERE id = $1`, [
      rows[0].id,
    ]);
  }
}

@Module({})
class WorkerModule {
  static create(): DynamicModule {
    return {
      module: WorkerModule,
      imports: [
        TypeOrmModule.forRoot({
          type: 'postgres',
          url: config.url,
          entities: [...OUTBOX_ENTITIES],
          synchronize: false,
          logging: false,
        }),
        OutboxModule.forRoot({
          concurrency: config.concurrency,
          listen: { connectionString: config.directUrl },
        }),
      ],
      providers: [LimitedHandler],
    };
  }
}

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(WorkerModule.create(), {
    logger: ['error', 'warn'],
  });
  await app.init();
  process.stdout.write('ready\n');
  process.once('SIGTERM', () => {
    void app
      .close()
      .then(() => runs.end())
      .then(() => process.exit(0));
  });
}

void main().catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`);
  process.exit(1);
});
