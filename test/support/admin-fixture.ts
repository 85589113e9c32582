import {
  Injectable,
  type DynamicModule,
  type INestApplication,
  type Provider,
} from '@nestjs/common';
import type { DataSource } from 'typeorm';
import {
  InvalidOutboxAdminQueryError,
  OnOutboxEvent,
  OutboxAdmin,
  type OutboxEvent,
  type OutboxModuleOptions,
} from '@app/outbox';
import { outboxTestingOptions } from '@app/outbox/testing';
import { useOutboxApp } from './outbox-app';
import type { TestAppFixture } from './test-database';

/** What the admin specs' events carry: `n` tells them apart; `mail: 'down'` fails the mailer. */
export interface OutagePayload {
  n: number;
  mail?: 'down';
}

/**
 * Handlers an outage leaves dead letters behind for: `mailer` (member.invited, invoice.paid)
 * throws `SMTP 421 busy, queue <n>` while the event's mail is down, `ledger` (invoice.paid)
 * always delivers, and `reporter` (report.requested) always fails, retrying an hour later, three
 * attempts in all.
 */
@Injectable()
export class OutageHandlers {
  @OnOutboxEvent('mailer', { events: ['member.invited', 'invoice.paid'] })
  mailer(event: OutboxEvent<OutagePayload>) {
    if (event.payload.mail === 'down') throw new Error(`SMTP 421 busy, queue ${event.payload.n}`);
  }

  @OnOutboxEvent('ledger', { events: ['invoice.paid'] })
  ledger() {}

  @OnOutboxEvent('reporter', { events: ['report.requested'], maxAttempts: 3, retry: [3_600_000] })
  reporter() {
    throw new Error('report service unavailable');
  }
}

export interface AdminAppOptions {
  /** Overrides of `outboxTestingOptions`: no engine runs, a test drains. */
  testing?: OutboxModuleOptions;
  /** Providers with the `@OnOutboxEvent` handlers the events run through. */
  providers?: Provider[];
  /** More modules, e.g. `OutboxDashboardModule.forRoot(...)`. */
  imports?: DynamicModule[];
  /** Tables emptied before each test; none unless named. */
  truncateEach?: string[];
}

export interface AdminApp extends TestAppFixture<INestApplication> {
  readonly admin: OutboxAdmin;
}

/**
 * What the admin and dashboard specs run on: the file's database and one outbox app on it with
 * the testing options, made before the file's tests and closed after them; `.admin` is its
 * OutboxAdmin. Read the fields inside tests and hooks.
 */
export function useAdminApp(options: AdminAppOptions = {}): AdminApp {
  const fixture = useOutboxApp(
    {
      outbox: outboxTestingOptions(options.testing),
      providers: options.providers,
      imports: options.imports,
    },
    { truncateEach: options.truncateEach },
  );
  return Object.defineProperty(fixture, 'admin', {
    get: () => fixture.app.get(OutboxAdmin),
  }) as AdminApp;
}

/**
 * `count` dead rows of `type` (aggregate `aggregateType`, ids `a-1`...) that `mailer` failed
 * with `mailer: Error: 421`, waiting for a replay: written straight to the table, in bulk.
 */
export async function insertDeadRows(
  dataSource: DataSource,
  type: string,
  count: number,
  aggregateType = 'thing',
): Promise<void> {
  await dataSource.query(
    `INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload, attempts, dead_at,
                               next_attempt_at, failures, last_error)
     SELECT gen_random_uuid(), $1, $3, 'a-' || n, '{}', 1, now(),
            '9999-12-31 00:00:00+00', '{"mailer": {"count": 1, "retryAt": null}}',
            'mailer: Error: 421'
     FROM generate_series(1, $2::int) AS n`,
    [type, count, aggregateType],
  );
}

/** How many rows still wait for a replay (their next attempt at the end of time). */
export async function waitingForReplay(dataSource: DataSource): Promise<number> {
  const [{ waiting }] = await dataSource.query<{ waiting: number }[]>(
    `SELECT count(*)::int AS waiting FROM outbox_event
     WHERE next_attempt_at = '9999-12-31 00:00:00+00'`,
  );
  return waiting;
}

/** The claim of a change by filter (`kind`, by `actor`) that a running process holds a minute. */
export async function claimAdminChange(
  dataSource: DataSource,
  kind: 'replay' | 'discard',
  actor: string,
): Promise<void> {
  await dataSource.query(
    `INSERT INTO outbox_admin_change (scope, change_id, kind, actor, selection, expires_at)
     VALUES ('dead-letters', gen_random_uuid(), $1, $2, '{}', now() + interval '1 minute')`,
    [kind, actor],
  );
}

/** Every item of a keyset listing, page by page from the first; at most 10 pages are read. */
export async function readAllPages<T>(
  page: (after: string | undefined) => Promise<{ items: T[]; next: string | null }>,
): Promise<{ items: T[]; pages: number }> {
  const items: T[] = [];
  let after: string | undefined;
  let pages = 0;
  do {
    const read = await page(after);
    items.push(...read.items);
    after = read.next ?? undefined;
    pages += 1;
  } while (after && pages < 10);
  return { items, pages };
}

/** What `call` was refused with; fails unless it is an InvalidOutboxAdminQueryError. */
export async function adminRefusal(
  call: () => Promise<unknown>,
): Promise<InvalidOutboxAdminQueryError> {
  const error = await call().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(InvalidOutboxAdminQueryError);
  return error as InvalidOutboxAdminQueryError;
}
