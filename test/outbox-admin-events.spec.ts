import { Injectable, type INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  InvalidOutboxAdminQueryError,
  OnOutboxEvent,
  OutboxAdmin,
  OutboxPublisher,
  OutboxLeaseStore,
  type NewOutboxEvent,
  type OutboxEvent,
  type OutboxEventDetail,
  type OutboxEventsFilter,
} from '@app/outbox';
import { drainUntilIdle, outboxTestingOptions } from '@app/outbox/testing';
import { createTestDatabase, type TestDatabase } from './support/test-database';
import { createOutboxApp } from './support/outbox-app';

/**
 * OutboxAdmin.events: an app's events of given types in one organization, whatever their state,
 * newest first by keyset pages, each with its state, deliveries and failures per handler; on
 * events that really ran, failed, died, were discarded and are under a lease.
 */

type Payload = { n: number; mail?: 'down' };

@Injectable()
class Handlers {
  @OnOutboxEvent('mailer', { events: ['member.invited', 'invoice.paid'] })
  mailer(event: OutboxEvent<Payload>) {
    if (event.payload.mail === 'down') throw new Error(`SMTP 421 busy, queue ${event.payload.n}`);
  }

  @OnOutboxEvent('ledger', { events: ['invoice.paid'] })
  ledger() {}

  @OnOutboxEvent('reporter', { events: ['report.requested'], maxAttempts: 3, retry: [3_600_000] })
  reporter() {
    throw new Error('report service unavailable');
  }
}

const TYPES = ['invoice.paid', 'member.invited', 'report.requested'];

let db: TestDatabase;
let app: INestApplication;
let admin: OutboxAdmin;

beforeAll(async () => {
  db = await createTestDatabase();
  app = await createOutboxApp({
    url: db.url,
    outbox: outboxTestingOptions({ maxAttempts: 1 }),
    providers: [Handlers],
  });
  admin = app.get(OutboxAdmin);
});

afterAll(async () => {
  await app?.close();
  await db?.close();
});

beforeEach(async () => {
  await db.dataSource.query('TRUNCATE outbox_event');
});

async function emit(events: NewOutboxEvent<Payload>[]): Promise<string[]> {
  return app
    .get(DataSource)
    .transaction((manager) => app.get(OutboxPublisher).emit(events, { manager }));
}

const event = (
  type: string,
  payload: Payload,
  organizationId = 'org-a',
): NewOutboxEvent<Payload> => ({
  type,
  aggregateType: type.split('.')[0],
  aggregateId: `agg-${payload.n}`,
  organizationId,
  payload,
});

/** The order `events` promises, read from the table with microseconds. */
async function newestFirst(organizationId: string, types: string[]): Promise<string[]> {
  const rows: { id: string }[] = await db.dataSource.query(
    `SELECT id FROM outbox_event WHERE organization_id = $1 AND type = ANY ($2::text[])
     ORDER BY occurred_at DESC, id DESC`,
    [organizationId, types],
  );
  return rows.map((row) => row.id);
}

describe('OutboxAdmin.events', () => {
  it('lists the events of the types asked for in one organization, newest first, with the state of each', async () => {
    const [delivered, dead, discarded, retrying] = await emit([
      event('invoice.paid', { n: 1 }),
      event('invoice.paid', { n: 2, mail: 'down' }),
      event('member.invited', { n: 3, mail: 'down' }),
      event('report.requested', { n: 4 }),
    ]);
    const [otherOrganization] = await emit([event('invoice.paid', { n: 5 }, 'org-b')]);
    await drainUntilIdle(app);
    await admin.discard({ ids: [discarded] }, { reason: 'member left', actor: 'test' });
    const [pending] = await emit([event('invoice.paid', { n: 6 })]);
    const [inFlight] = await emit([event('member.invited', { n: 7 })]);
    const claimed = await app
      .get(OutboxLeaseStore)
      .claim({ limit: 1, leaseMs: 60_000, types: ['member.invited'] });
    expect(claimed.ok && claimed.value.map((r) => r.id)).toEqual([inFlight]);

    const { items, next } = await admin.events({ types: TYPES, organizationId: 'org-a' });
    expect(next).toBeNull();
    expect(items.map((i) => i.id)).toEqual(await newestFirst('org-a', TYPES));
    expect(items.map((i) => i.id)).not.toContain(otherOrganization);
    const byId = new Map(items.map((i) => [i.id, i]));
    const state = (id: string) => byId.get(id)?.state;
    expect([delivered, dead, discarded, retrying, pending, inFlight].map(state)).toEqual([
      'delivered',
      'dead',
      'discarded',
      'retrying',
      'pending',
      'in-flight',
    ]);

    expect(byId.get(delivered)).toMatchObject({
      type: 'invoice.paid',
      aggregateType: 'invoice',
      aggregateId: 'agg-1',
      organizationId: 'org-a',
      payload: { n: 1 },
      attempts: 1,
      failures: {},
      lastError: null,
      nextAttemptAt: null,
      dispatchedAt: expect.any(Date),
      deadAt: null,
    });
    expect(Object.keys(byId.get(delivered)!.deliveries).sort()).toEqual(['ledger', 'mailer']);
    expect(byId.get(dead)).toMatchObject({
      deliveries: { ledger: expect.any(String) },
      failures: { mailer: { count: 1, retryAt: null } },
      lastError: 'mailer: Error: SMTP 421 busy, queue 2',
      dispatchedAt: null,
      deadAt: expect.any(Date),
    });
    expect(byId.get(discarded)).toMatchObject({
      discardReason: 'member left',
      discardedAt: expect.any(Date),
      nextAttemptAt: null,
    });
    const retry = byId.get(retrying)!;
    expect(retry).toMatchObject({
      failures: { reporter: { count: 1 } },
      lastError: 'reporter: Error: report service unavailable',
      deadAt: null,
    });
    expect(retry.nextAttemptAt!.getTime()).toBeGreaterThan(Date.now());
    expect(byId.get(pending)).toMatchObject({ attempts: 0, deliveries: {}, failures: {} });
    expect(byId.get(pending)!.nextAttemptAt).toBeInstanceOf(Date);
    expect(byId.get(inFlight)).toMatchObject({ attempts: 1, leaseExpiresAt: expect.any(Date) });

    // show() tells the same state.
    expect((await admin.show(discarded))?.state).toBe('discarded');
    expect((await admin.show(inFlight))?.state).toBe('in-flight');
  });

  it('pages by keyset, merging the types: every event once, in one order, through equal and sub-millisecond times', async () => {
    await emit([
      ...Array.from({ length: 4 }, (_, n) => event('invoice.paid', { n })),
      ...Array.from({ length: 3 }, (_, n) => event('member.invited', { n: n + 10 })),
      event('invoice.paid', { n: 20 }, 'org-b'),
    ]);
    // Times equal, and differing below a millisecond (which a JavaScript Date cannot hold).
    await db.dataSource.query(
      `UPDATE outbox_event
       SET occurred_at = CASE WHEN (payload ->> 'n')::int % 2 = 0
                              THEN timestamptz '2026-01-01 00:00:00.000001+00'
                              ELSE timestamptz '2026-01-01 00:00:00.000002+00' END`,
    );
    const filter: OutboxEventsFilter = {
      types: ['member.invited', 'invoice.paid'],
      organizationId: 'org-a',
    };
    const whole = await admin.events(filter, { limit: 100 });
    expect(whole.items.map((i) => i.id)).toEqual(
      await newestFirst('org-a', ['member.invited', 'invoice.paid']),
    );
    expect(whole.items).toHaveLength(7);

    const paged: OutboxEventDetail[] = [];
    let after: string | undefined;
    let pages = 0;
    do {
      const page = await admin.events(filter, { limit: 3, after });
      paged.push(...page.items);
      after = page.next ?? undefined;
      pages += 1;
    } while (after && pages < 10);
    expect(pages).toBe(3);
    expect(paged.map((i) => i.id)).toEqual(whole.items.map((i) => i.id));
  });

  it('finds one event by id within the types and the organization, and filters by aggregate, organization or type alone', async () => {
    const [paid, invited] = await emit([
      event('invoice.paid', { n: 1 }),
      event('member.invited', { n: 2 }),
    ]);
    const [elsewhere] = await emit([event('invoice.paid', { n: 3 }, 'org-b')]);
    await drainUntilIdle(app);
    const ids = async (filter: OutboxEventsFilter) =>
      (await admin.events(filter)).items.map((i) => i.id).sort();

    const scope = { types: ['invoice.paid'], organizationId: 'org-a' };
    expect(await ids({ ...scope, ids: [paid] })).toEqual([paid]);
    expect(await ids({ ...scope, ids: [paid.toUpperCase()] })).toEqual([paid]);
    expect(await ids({ ...scope, ids: [invited] })).toEqual([]);
    expect(await ids({ ...scope, ids: [elsewhere] })).toEqual([]);
    expect(await ids({ ids: [elsewhere, invited] })).toEqual([elsewhere, invited].sort());
    expect(await ids({ aggregateType: 'invoice', aggregateId: 'agg-1' })).toEqual([paid]);
    expect(await ids({ organizationId: 'org-b' })).toEqual([elsewhere]);
    expect(await ids({ types: ['member.invited'] })).toEqual([invited]);
    // A type named twice is read once.
    expect(await ids({ types: ['invoice.paid', 'invoice.paid'], organizationId: 'org-a' })).toEqual(
      [paid],
    );
  });
});

describe('OutboxAdmin.events refuses bad input before querying, naming the field and the value', () => {
  const scope = { types: ['invoice.paid'], organizationId: 'org-a' };

  it('refuses a cursor of list', async () => {
    await emit([
      event('invoice.paid', { n: 1, mail: 'down' }),
      event('invoice.paid', { n: 2, mail: 'down' }),
    ]);
    await drainUntilIdle(app);
    const { next } = await admin.list({}, { limit: 1 });
    expect(next).not.toBeNull();
    await expect(admin.events(scope, { after: next! })).rejects.toThrow(
      'OutboxAdmin: page.after must be a `next` cursor of events',
    );
  });

  it.each([
    [
      'no condition',
      () => admin.events({}),
      'OutboxAdmin: filter must be a filter with at least one of types, organizationId, aggregateType, aggregateId, ids, got "{}"',
    ],
    [
      'a field it does not know',
      () =>
        admin.events({ types: ['invoice.paid'], organisationId: 'org-a' } as OutboxEventsFilter),
      'OutboxAdmin: filter.organisationId must be left out: events filters by types, organizationId, aggregateType, aggregateId, ids, got "org-a"',
    ],
    [
      'no filter',
      () => admin.events(null as unknown as OutboxEventsFilter),
      'OutboxAdmin: filter must be an object, got null',
    ],
    [
      'filter.types (empty)',
      () => admin.events({ types: [], organizationId: 'org-a' }),
      'OutboxAdmin: filter.types must be a non-empty list of non-empty strings, got ',
    ],
    [
      'filter.organizationId',
      () => admin.events({ organizationId: '' }),
      'OutboxAdmin: filter.organizationId must be a non-empty string, got ""',
    ],
    [
      'filter.ids (not a UUID)',
      () => admin.events({ ...scope, ids: ['42'] }),
      'OutboxAdmin: filter.ids must be a UUID, got "42"',
    ],
    [
      'filter.ids (empty)',
      () => admin.events({ ...scope, ids: [] }),
      'OutboxAdmin: filter.ids must be a list of 1 to 500 event ids, got ',
    ],
    [
      'page.limit',
      () => admin.events(scope, { limit: 501 }),
      'OutboxAdmin: page.limit must be an integer from 1 to 500, got 501',
    ],
    [
      'page.after',
      () => admin.events(scope, { after: 'not-a-cursor' }),
      'OutboxAdmin: page.after must be a `next` cursor of events, got "not-a-cursor"',
    ],
  ])('%s', async (_case, call, message) => {
    const error = await call().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOutboxAdminQueryError);
    expect((error as Error).message).toContain(message);
  });
});
