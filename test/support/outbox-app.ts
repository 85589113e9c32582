import type {
  DynamicModule,
  INestApplication,
  LoggerService,
  Provider,
  Type,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import {
  OUTBOX_ENTITIES,
  OutboxLeaseStore,
  OutboxModule,
  OutboxPublisher,
  type NewOutboxEvent,
  type OutboxModuleOptions,
} from '@app/outbox';
import { GuardedLogger } from './log-guard';
import { directUrlBehind } from './pooler';
import { useTestApp, type TestAppFixture, type TestDatabaseFixtureOptions } from './test-database';

export interface OutboxAppOptions {
  /**
   * Connection string of the test database. When it goes through the run's pooler (pooler.ts),
   * the outbox LISTENs on the direct URL unless `outbox.listen.connectionString` says otherwise.
   */
  url: string;
  outbox?: OutboxModuleOptions;
  /** Replaces `OutboxModule.forRoot(outbox)`, e.g. with a `forRootAsync` definition. */
  outboxModule?: DynamicModule;
  /** Providers with `@OnOutboxEvent` handlers, and anything else the test needs. */
  providers?: Provider[];
  controllers?: Type[];
  imports?: Array<Type | DynamicModule | Promise<DynamicModule>>;
  /** Receives what the app logs (the log guard otherwise; printed with OUTBOX_TEST_LOG set). */
  logger?: LoggerService;
  /** More TypeORM DataSource options (`ssl`, `extra`). */
  typeorm?: {
    ssl?: unknown;
    extra?: Record<string, unknown>;
    subscribers?: Array<new () => unknown>;
  };
}

/**
 * A Nest application with TypeORM on the test database and the outbox module, initialised
 * (so bootstrap hooks ran and the engine started unless `autoStart` is off). Close it with
 * `app.close()`, which runs the shutdown hooks as a SIGTERM would.
 */
/**
 * A test's options over a suite's defaults, with `tuning` merged field by field, so a test that
 * sets one knob keeps the others the suite chose.
 */
export function withDefaults(
  defaults: OutboxModuleOptions,
  options: OutboxModuleOptions = {},
): OutboxModuleOptions {
  return { ...defaults, ...options, tuning: { ...defaults.tuning, ...options.tuning } };
}

export async function createOutboxApp(options: OutboxAppOptions): Promise<INestApplication> {
  const direct = directUrlBehind(options.url);
  const outbox: OutboxModuleOptions | undefined =
    direct && !options.outbox?.listen?.connectionString
      ? {
          ...options.outbox,
          listen: { ...options.outbox?.listen, connectionString: direct },
        }
      : options.outbox;
  const moduleRef = await Test.createTestingModule({
    imports: [
      TypeOrmModule.forRoot({
        type: 'postgres',
        url: options.url,
        entities: [...OUTBOX_ENTITIES],
        synchronize: false,
        logging: false,
        connectTimeoutMS: 5000,
        ...(options.typeorm as object),
      }),
      options.outboxModule ??
        OutboxModule.forRoot(withDefaults({ tuning: { pollIntervalMs: 60_000 } }, outbox)),
      ...(options.imports ?? []),
    ],
    providers: options.providers ?? [],
    controllers: options.controllers ?? [],
  }).compile();
  const app = moduleRef.createNestApplication({
    // Into the log guard by default, so every suite proves no planted secret is logged.
    logger: options.logger ?? new GuardedLogger(),
  });
  return initOrClose(app);
}

/** Initialises the app; a boot that fails after TypeORM connected still releases its connections. */
export async function initOrClose(app: INestApplication): Promise<INestApplication> {
  try {
    await app.init();
  } catch (error) {
    await app.close().catch(() => undefined);
    throw error;
  }
  return app;
}

/** Polls until `condition` holds; fails with `what` after 20 s. No assertion on how long it took. */
export async function eventually(
  what: string,
  condition: () => boolean | Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A promise with its resolver outside, for handlers a test holds open. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

export interface TestLeftovers {
  /** A gate a handler can wait on; resolved after the test at the latest. */
  hold(): { promise: Promise<void>; resolve: () => void };
  /** `app`, closed after the test unless the test closes it through `close` first. */
  closeAfterTest<A extends INestApplication>(app: A): A;
  /** Closes `app` now (the shutdown hooks run), and not again after the test. */
  close(app: INestApplication): Promise<void>;
}

/**
 * What each test leaves open, undone after it so that a failed test leaves nothing hanging:
 * the gates it holds handlers on are resolved first, then the apps it started are closed.
 */
export function useTestLeftovers(): TestLeftovers {
  const gates: Array<() => void> = [];
  const open = new Set<INestApplication>();
  const close = (app: INestApplication) => {
    open.delete(app);
    return app.close();
  };
  afterEach(async () => {
    for (const release of gates.splice(0)) release();
    await Promise.all([...open].map(close));
  });
  return {
    hold() {
      const gate = deferred();
      gates.push(() => gate.resolve());
      return gate;
    },
    closeAfterTest(app) {
      open.add(app);
      return app;
    },
    close,
  };
}

/** Emits `event` (or `events`) in a transaction of its own, committed before this resolves. */
export function emitCommitted<P>(app: INestApplication, event: NewOutboxEvent<P>): Promise<string>;
export function emitCommitted<P>(
  app: INestApplication,
  events: readonly NewOutboxEvent<P>[],
): Promise<string[]>;
export function emitCommitted(
  app: INestApplication,
  events: NewOutboxEvent | readonly NewOutboxEvent[],
): Promise<string | string[]> {
  return app
    .get(DataSource)
    .transaction((manager) => app.get(OutboxPublisher).emit(events as NewOutboxEvent, { manager }));
}

/** A handler's body that tells when it runs, then waits until `proceed` is called. */
export function heldHandler(): {
  run: () => Promise<void>;
  running: Promise<void>;
  proceed: () => void;
} {
  const running = deferred();
  const proceed = deferred();
  return {
    run: async () => {
      running.resolve();
      await proceed.promise;
    },
    running: running.promise,
    proceed: () => proceed.resolve(),
  };
}

/**
 * Ends the lease of event `id` and claims it as another instance would after a stall; the
 * attempt counts that claim took.
 */
export async function takeOverLease(app: INestApplication, id: string): Promise<number[] | false> {
  await app
    .get(DataSource)
    .query(
      `UPDATE outbox_event SET lease_expires_at = now(), next_attempt_at = now() WHERE id = $1`,
      [id],
    );
  const takeover = await app.get(OutboxLeaseStore).claim({ limit: 1, leaseMs: 5000 });
  return takeover.ok && takeover.value.map((r) => r.attempts);
}

/** Emits each of `events` in a transaction of its own, one after another, as requests would. */
export async function emitEachCommitted(
  app: INestApplication,
  events: readonly NewOutboxEvent[],
): Promise<string[]> {
  const ids: string[] = [];
  for (const event of events) ids.push(await emitCommitted(app, event));
  return ids;
}

/**
 * The file's database and an outbox app on it (`createOutboxApp` with these options), made
 * before its tests and closed after them. Read `.app`, `.db` and `.sql` inside tests and hooks.
 */
export function useOutboxApp(
  options: Omit<OutboxAppOptions, 'url'>,
  fixture?: TestDatabaseFixtureOptions,
): TestAppFixture<INestApplication> {
  return useTestApp((db) => createOutboxApp({ url: db.url, ...options }), fixture);
}
