import { OutboxLeaseStore, type OutboxEventsFilter } from '@app/outbox';
import { drainUntilIdle } from '@app/outbox/testing';
import {
  adminRefusal,
  OutageHandlers,
  readAllPages,
  useAdminApp,
  type OutagePayload,
} from './support/admin-fixture';
import { numberedEvent } from './support/events';
import { emitCommitted } from './support/outbox-app';

/**
 * OutboxAdmin.events: an app's events of given types in one organization, whatever their state,
 * newest first by keyset pages, each with its state, deliveries and failures per handler; on
 * events that really ran, failed, died, were discarded and are under a lease.
 */

const TYPES = ['invoice.paid', 'member.invited', 'report.requested'];

const t = useAdminApp({
  testing: { maxAttempts: 1 },
  providers: [OutageHandlers],
  truncateEach: ['outbox_event'],
});

const event = (type: string, payload: OutagePayload, organizationId = 'org-a') =>
  numberedEvent(type, payload, organizationId);

/** The order `events` promises, read from the table with microseconds. */
async function newestFirst(organizationId: string, types: string[]): Promise<string[]> {
  const rows: { id: string }[] = await t.db.dataSource.query(
    `SELECT id FROM outbox_event WHERE organization_id = $1 AND type = ANY ($2::text[])
     ORDER BY occurred_at DESC, id DESC`,
    [organizationId, types],
  );
  return rows.map((row) => row.id);
}

describe('OutboxAdmin.events', () => {
  it('lists the events of the types asked for in one organization, newest first, with the state of each', async () => {
    const [delivered, dead, discarded, retrying] = await emitCommitted(t.app, [
      event('invoice.paid', { n: 1 }),
      event('invoice.paid', { n: 2, mail: 'down' }),
      event('member.invited', { n: 3, mail: 'down' }),
      event('report.requested', { n: 4 }),
    ]);
    const [otherOrganization] = await emitCommitted(t.app, [
      event('invoice.paid', { n: 5 }, 'org-b'),
    ]);
    await drainUntilIdle(t.app);
    await t.admin.discard({ ids: [discarded] }, { reason: 'member left', actor: 'test' });
    const [pending] = await emitCommitted(t.app, [event('invoice.paid', { n: 6 })]);
    const [inFlight] = await emitCommitted(t.app, [event('member.invited', { n: 7 })]);
    const claimed = await t.app
      .get(OutboxLeaseStore)
      .claim({ limit: 1, leaseMs: 60_000, types: ['member.invited'] });
    expect(claimed.ok && claimed.value.map((r) => r.id)).toEqual([inFlight]);

    const { items, next } = await t.admin.events({ types: TYPES, organizationId: 'org-a' });
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
    expect((await t.admin.show(discarded))?.state).toBe('discarded');
    expect((await t.admin.show(inFlight))?.state).toBe('in-flight');
  });

  it('pages by keyset, merging the types: every event once, in one order, through equal and sub-millisecond times', async () => {
    await emitCommitted(t.app, [
      ...Array.from({ length: 4 }, (_, n) => event('invoice.paid', { n })),
      ...Array.from({ length: 3 }, (_, n) => event('member.invited', { n: n + 10 })),
      event('invoice.paid', { n: 20 }, 'org-b'),
    ]);
    // Times equal, and differing below a millisecond (which a JavaScript Date cannot hold).
    await t.db.dataSource.query(
      `UPDATE outbox_event
       SET occurred_at = CASE WHEN (payload ->> 'n')::int % 2 = 0
                              THEN timestamptz '2026-01-01 00:00:00.000001+00'
                              ELSE timestamptz '2026-01-01 00:00:00.000002+00' END`,
    );
    const filter: OutboxEventsFilter = {
      types: ['member.invited', 'invoice.paid'],
      organizationId: 'org-a',
    };
    const whole = await t.admin.events(filter, { limit: 100 });
    expect(whole.items.map((i) => i.id)).toEqual(
      await newestFirst('org-a', ['member.invited', 'invoice.paid']),
    );
    expect(whole.items).toHaveLength(7);

    const paged = await readAllPages((after) => t.admin.events(filter, { limit: 3, after }));
    expect(paged.pages).toBe(3);
    expect(paged.items.map((i) => i.id)).toEqual(whole.items.map((i) => i.id));
  });

  it('finds one event by id within the types and the organization, and filters by aggregate, organization or type alone', async () => {
    const [paid, invited] = await emitCommitted(t.app, [
      event('invoice.paid', { n: 1 }),
      event('member.invited', { n: 2 }),
    ]);
    const [elsewhere] = await emitCommitted(t.app, [event('invoice.paid', { n: 3 }, 'org-b')]);
    await drainUntilIdle(t.app);
    const ids = async (filter: OutboxEventsFilter) =>
      (await t.admin.events(filter)).items.map((i) => i.id).sort();

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
    await emitCommitted(t.app, [
      event('invoice.paid', { n: 1, mail: 'down' }),
      event('invoice.paid', { n: 2, mail: 'down' }),
    ]);
    await drainUntilIdle(t.app);
    const { next } = await t.admin.list({}, { limit: 1 });
    expect(next).not.toBeNull();
    await expect(t.admin.events(scope, { after: next! })).rejects.toThrow(
      'OutboxAdmin: page.after must be a `next` cursor of events',
    );
  });

  it.each([
    [
      'no condition',
      () => t.admin.events({}),
      'OutboxAdmin: filter must be a filter with at least one of types, organizationId, aggregateType, aggregateId, ids, got "{}"',
    ],
    [
      'a field it does not know',
      () =>
        t.admin.events({ types: ['invoice.paid'], organisationId: 'org-a' } as OutboxEventsFilter),
      'OutboxAdmin: filter.organisationId must be left out: events filters by types, organizationId, aggregateType, aggregateId, ids, got "org-a"',
    ],
    [
      'no filter',
      () => t.admin.events(null as unknown as OutboxEventsFilter),
      'OutboxAdmin: filter must be an object, got null',
    ],
    [
      'filter.types (empty)',
      () => t.admin.events({ types: [], organizationId: 'org-a' }),
      'OutboxAdmin: filter.types must be a non-empty list of non-empty strings, got ',
    ],
    [
      'filter.organizationId',
      () => t.admin.events({ organizationId: '' }),
      'OutboxAdmin: filter.organizationId must be a non-empty string, got ""',
    ],
    [
      'filter.ids (not a UUID)',
      () => t.admin.events({ ...scope, ids: ['42'] }),
      'OutboxAdmin: filter.ids must be a UUID, got "42"',
    ],
    [
      'filter.ids (empty)',
      () => t.admin.events({ ...scope, ids: [] }),
      'OutboxAdmin: filter.ids must be a list of 1 to 500 event ids, got ',
    ],
    [
      'page.limit',
      () => t.admin.events(scope, { limit: 501 }),
      'OutboxAdmin: page.limit must be an integer from 1 to 500, got 501',
    ],
    [
      'page.after',
      () => t.admin.events(scope, { after: 'not-a-cursor' }),
      'OutboxAdmin: page.after must be a `next` cursor of events, got "not-a-cursor"',
    ],
  ])('%s', async (_case, call, message) => {
    expect((await adminRefusal(call)).message).toContain(message);
  });
});
