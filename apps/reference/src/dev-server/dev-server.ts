import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { Logger, type INestApplication } from '@nestjs/common';
import { validateAppConfig } from '../config/app.config';
import { startEmbeddedDatabase, type EmbeddedDatabase } from './embedded-database';
import {
  assertPortFree,
  describeStartupError,
  displayPath,
  portError,
  StartupError,
} from './startup';
import { walkthrough } from './walkthrough';

export interface DevServerOptions {
  /**
   * Creates the Nest app (not yet listening) on the environment given, whose DATABASE_URL is
   * set: the embedded database's when the process has none.
   */
  createApp: (env: Record<string, string | undefined>) => Promise<INestApplication>;
}

const DEFAULT_EMBEDDED_PORT = 54329;
const DEFAULT_EMBEDDED_DATA_DIR = '.data/postgres';
const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
/** Beyond the outbox's shutdown grace: time for the HTTP server and the database to stop. */
const STOP_MARGIN_MS = 15_000;

let creating: Promise<INestApplication> | undefined;
let app: INestApplication | undefined;
let listening: Promise<unknown> | undefined;
let database: Promise<EmbeddedDatabase> | undefined;
let stopping: Promise<void> | undefined;
let shutdownGraceMs = 10_000;

/**
 * What `npm start` runs: the app on 127.0.0.1:PORT, on an embedded PostgreSQL unless
 * DATABASE_URL is set, with a walkthrough printed once it listens; Ctrl-C (or SIGTERM) stops it
 * in order. Exits the process when it stops or fails to start.
 */
export function runDevServer(options: DevServerOptions): void {
  bootstrap(options).catch((error: unknown) => {
    // Once stopping, a start step failing because its database went away is expected.
    if (!stopping) Logger.error(describeStartupError(error), 'Bootstrap');
    void stop(1);
  });
}

/**
 * The dev server owns the stop order: the app drains first (HTTP, then the outbox's in-flight
 * work, within OUTBOX_SHUTDOWN_GRACE_MS), the embedded database last. Nest's own shutdown hooks
 * are not enabled, as they would exit before the database is stopped.
 */
async function bootstrap({ createApp }: DevServerOptions): Promise<void> {
  for (const signal of STOP_SIGNALS) process.on(signal, onStopSignal);
  const env = { ...process.env };
  const generatedOperatorToken = developmentDefaults(env);
  const config = validateAppConfig(env);
  shutdownGraceMs = config.OUTBOX_SHUTDOWN_GRACE_MS;
  // Before the database starts: a busy port should not cost a database start to find out.
  await assertPortFree(config.PORT, 'the HTTP server', 'PORT');

  if (!env.DATABASE_URL) {
    const port = embeddedPort(env.EMBEDDED_PG_PORT);
    const dataDir = resolve(env.EMBEDDED_PG_DATA_DIR || DEFAULT_EMBEDDED_DATA_DIR);
    Logger.log(
      `No DATABASE_URL: starting an embedded PostgreSQL on 127.0.0.1:${port} ` +
        `(data in ${displayPath(dataDir)})`,
      'Bootstrap',
    );
    if (stopping) return;
    database = startEmbeddedDatabase({ port, dataDir });
    env.DATABASE_URL = (await database).url;
  }

  if (stopping) return;
  creating = createApp(env);
  const created = await creating;
  if (stopping) return; // shutDown closes it; nothing ran yet, lifecycle hooks run in listen
  app = created;
  listening = app.listen(config.PORT, '127.0.0.1');
  try {
    await listening;
  } catch (error) {
    throw portError(error, config.PORT, 'the HTTP server', 'PORT') ?? error;
  }
  const { port } = (app.getHttpServer() as Server).address() as AddressInfo;
  process.stdout.write(walkthrough(`http://127.0.0.1:${port}`, { generatedOperatorToken }));
}

function onStopSignal(signal: NodeJS.Signals): void {
  // A terminal's Ctrl-C reaches the app directly and again through npm, which forwards it.
  if (stopping) return;
  Logger.log(
    `${signal}: finishing in-flight work, then stopping` +
      (database ? ' (the embedded PostgreSQL last)' : ''),
    'Shutdown',
  );
  void stop(0);
}

/** Stops once, in order, then exits; a start in progress finishes its current step first. */
function stop(exitCode: number): Promise<void> {
  if (!stopping) {
    // If something never settles, still stop the database rather than leave it behind.
    const backstopMs = shutdownGraceMs + STOP_MARGIN_MS;
    setTimeout(() => {
      Logger.error(
        `Not stopped after ${backstopMs} ms: stopping the database and exiting`,
        'Shutdown',
      );
      void Promise.resolve(database)
        .then((embedded) => embedded?.stop())
        .catch(() => undefined)
        .finally(() => process.exit(1));
    }, backstopMs).unref();
    stopping = shutDown().then((ok) => process.exit(ok ? exitCode : 1));
  }
  return stopping;
}

async function shutDown(): Promise<boolean> {
  let ok = true;
  // A Nest start under way is let finish when a database is to be stopped after it, so that
  // its connections close first. Otherwise it is not waited for: against an unreachable
  // DATABASE_URL, TypeORM retries for a long while.
  const running = app ?? (database ? await creating?.catch(() => undefined) : undefined);
  if (running) {
    await listening?.catch(() => undefined);
    try {
      await running.close();
    } catch (error) {
      ok = false;
      Logger.error(`Closing the app failed: ${describeStartupError(error)}`, 'Shutdown');
    }
  }
  const embedded = await database?.catch(() => undefined);
  if (embedded) {
    try {
      await embedded.stop();
      Logger.log('Embedded PostgreSQL stopped', 'Shutdown');
    } catch (error) {
      ok = false;
      Logger.error(describeStartupError(error), 'Shutdown');
    }
  }
  return ok;
}

/**
 * What a developer's machine needs that a deployment sets itself: an operator token (generated
 * when none is set; returned so the walkthrough can show it) and webhooks to local receivers.
 */
function developmentDefaults(env: Record<string, string | undefined>): string | undefined {
  env.WEBHOOK_ALLOW_PRIVATE_ADDRESSES ??= '1';
  if (env.OPERATOR_TOKEN) return undefined;
  env.OPERATOR_TOKEN = randomBytes(32).toString('base64url');
  return env.OPERATOR_TOKEN;
}

function embeddedPort(value: string | undefined): number {
  if (value === undefined || value === '') return DEFAULT_EMBEDDED_PORT;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new StartupError(`EMBEDDED_PG_PORT must be a port number (1-65535), not "${value}"`);
  }
  return port;
}
