import { Injectable } from '@nestjs/common';
import {
  OnOutboxEvent,
  type OutboxAdmin,
  type NewOutboxEvent,
  type OutboxEvent,
} from '@app/outbox';
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

/** OutboxAdmin: dead letters listed, paged, grouped and shown, on events that really failed. */

type Payload = OutagePayload & { card?: 'declined'; slow?: true };

/** Besides the outage's handlers: `billing` (invoice.paid) throws for a declined card. */
@Injectable()
class Billing {
  @OnOutboxEvent('billing', { events: ['invoice.paid'] })
  billing(event: OutboxEvent<Payload>) {
    if (event.payload.card === 'declined')
      throw new Error(`card ending ${event.payload.n} declined`);
  }
}

const t = useAdminApp({
  testing: { maxAttempts: 1 },
  providers: [OutageHandlers, Billing],
  truncateEach: ['outbox_event'],
});

async function emitAll(events: NewOutboxEvent<Payload>[]): Promise<string[]> {
  const ids = await emitCommitted(t.app, events);
  await drainUntilIdle(t.app);
  return ids;
}

const event = (type: string, payload: Payload, organizationId = 'org-1') =>
  numberedEvent(type, payload, organizationId);

describe('OutboxAdmin.list', () => {
  it('lists dead events newest first, with what failed, what was delivered and the scrubbed error', async () => {
    const [invited, paid] = await emitAll([
      event('member.invited', { n: 1, mail: 'down' }),
      event('invoice.paid', { n: 2, mail: 'down' }),
      event('invoice.paid', { n: 3 }),
    ]);
    const { items, next } = await t.admin.list();
    expect(next).toBeNull();
    expect(items.map((i) => i.id).sort()).toEqual([invited, paid].sort());
    const paidItem = items.find((i) => i.id === paid)!;
    expect(paidItem).toMatchObject({
      type: 'invoice.paid',
      state: 'dead',
      attempts: 1,
      failedHandlers: [{ name: 'mailer', failures: 1, retryAt: null }],
      lastError: 'mailer: Error: SMTP 421 busy, queue 2',
    });
    expect(paidItem.deliveredHandlers.sort()).toEqual(['billing', 'ledger']);
    expect(paidItem.deadAt).not.toBeNull();
  });

  it('pages by keyset: every dead event once, in one order, through equal and sub-millisecond dead times', async () => {
    await emitAll(
      Array.from({ length: 7 }, (_, n) => event('member.invited', { n, mail: 'down' })),
    );
    // Events settled in one statement die at the same time, and times differ below a
    // millisecond (which a JavaScript Date cannot hold): the cursor must get both right.
    await t.db.dataSource.query(
      `UPDATE outbox_event
       SET dead_at = CASE WHEN (payload ->> 'n')::int < 4 THEN timestamptz '2026-01-01 00:00:00.000001+00'
                          ELSE timestamptz '2026-01-01 00:00:00.000002+00' END`,
    );
    const whole = await t.admin.list({}, { limit: 100 });
    expect(whole.items).toHaveLength(7);
    expect(new Set(whole.items.map((i) => i.deadAt!.getTime())).size).toBe(1);

    const paged = await readAllPages((after) => t.admin.list({}, { limit: 3, after }));
    expect(paged.pages).toBe(3);
    expect(paged.items.map((i) => i.id)).toEqual(whole.items.map((i) => i.id));
  });

  it('filters by type, failed handler, organization, aggregate, error text, time, and includes retrying events on request', async () => {
    const [invited, , declined, report] = await emitAll([
      event('member.invited', { n: 1, mail: 'down' }, 'org-a'),
      event('invoice.paid', { n: 2, mail: 'down' }, 'org-b'),
      event('invoice.paid', { n: 3, card: 'declined' }, 'org-b'),
      event('report.requested', { n: 4, slow: true }),
    ]);
    const ids = async (filter: Parameters<OutboxAdmin['list']>[0]) =>
      (await t.admin.list(filter)).items.map((i) => i.id).sort();

    expect(await ids({ types: ['member.invited'] })).toEqual([invited]);
    expect(await ids({ handler: 'billing' })).toEqual([declined]);
    expect(await ids({ handler: 'ledger' })).toEqual([]);
    expect(await ids({ organizationId: 'org-a' })).toEqual([invited]);
    expect(await ids({ aggregateType: 'invoice', aggregateId: 'agg-3' })).toEqual([declined]);
    expect(await ids({ errorContains: 'CARD ENDING' })).toEqual([declined]);
    expect(await ids({ deadBefore: new Date(Date.now() - 3_600_000) })).toEqual([]);
    expect((await ids({ deadAfter: new Date(Date.now() - 3_600_000) })).length).toBe(3);

    expect(await ids({})).not.toContain(report);
    const withRetrying = await t.admin.list({ includeRetrying: true, types: ['report.requested'] });
    expect(withRetrying.items).toMatchObject([
      {
        id: report,
        state: 'retrying',
        deadAt: null,
        failedHandlers: [{ name: 'reporter', failures: 1 }],
      },
    ]);
    expect(withRetrying.items[0].failedHandlers[0].retryAt!.getTime()).toBeGreaterThan(Date.now());
  });
});

describe('OutboxAdmin.groups', () => {
  it('groups by type, failed handler and error fingerprint: one outage is one line', async () => {
    await emitAll([
      ...Array.from({ length: 4 }, (_, n) => event('invoice.paid', { n, mail: 'down' })),
      ...Array.from({ length: 2 }, (_, n) => event('member.invited', { n: n + 10, mail: 'down' })),
      event('invoice.paid', { n: 99, card: 'declined' }),
    ]);
    const groups = await t.admin.groups();
    expect(groups.map((g) => [g.type, g.handler, g.count])).toEqual([
      ['invoice.paid', 'mailer', 4],
      ['member.invited', 'mailer', 2],
      ['invoice.paid', 'billing', 1],
    ]);
    // The queue numbers differ; the fingerprint does not.
    expect(groups[0].fingerprint).toBe(groups[1].fingerprint);
    expect(groups[0].sampleError).toMatch(/^Error: SMTP 421 busy, queue \d+$/);
    expect(groups[2]).toMatchObject({ sampleError: 'Error: card ending 99 declined' });
    expect(groups[0].firstSeenAt.getTime()).toBeLessThanOrEqual(groups[0].lastSeenAt.getTime());

    expect((await t.admin.groups({ handler: 'billing' })).map((g) => g.count)).toEqual([1]);
  });
});

describe('OutboxAdmin.groups narrows and fingerprints per handler', () => {
  it('keeps to the handler and the error text asked for, also on events where several handlers failed', async () => {
    await emitAll([
      event('invoice.paid', { n: 1, mail: 'down', card: 'declined' }),
      event('invoice.paid', { n: 2, mail: 'down' }),
    ]);
    const rows = (groups: Awaited<ReturnType<OutboxAdmin['groups']>>) =>
      groups.map((g) => [g.handler, g.count]);
    expect(rows(await t.admin.groups())).toEqual([
      ['mailer', 2],
      ['billing', 1],
    ]);
    expect(rows(await t.admin.groups({ handler: 'billing' }))).toEqual([['billing', 1]]);
    expect(rows(await t.admin.groups({ errorContains: 'smtp' }))).toEqual([['mailer', 2]]);
  });

  it('blanks hex ids in the fingerprint, and groups events that name no failed handler under null', async () => {
    const ids = await emitAll([
      event('member.invited', { n: 1, mail: 'down' }),
      event('member.invited', { n: 2, mail: 'down' }),
      event('member.invited', { n: 3, mail: 'down' }),
    ]);
    await t.db.dataSource.query(
      `UPDATE outbox_event SET last_error = 'mailer: Error: no template ' || $2
       WHERE id = $1`,
      [ids[0], '5f2b7c9e1a2b3c4d5e6f7a8b'],
    );
    await t.db.dataSource.query(
      `UPDATE outbox_event SET last_error = 'mailer: Error: no template ' || $2
       WHERE id = $1`,
      [ids[1], 'deadbeefcafe0123'],
    );
    // What an older version's event-level rule left: dead, no per-handler failures.
    await t.db.dataSource.query(
      `UPDATE outbox_event SET failures = '{}', last_error = 'Error: relay gave up' WHERE id = $1`,
      [ids[2]],
    );
    const groups = await t.admin.groups();
    expect(groups.map((g) => [g.handler, g.count, g.sampleError])).toEqual([
      ['mailer', 2, expect.stringMatching(/^Error: no template [0-9a-f]+$/)],
      [null, 1, 'Error: relay gave up'],
    ]);
  });
});

describe('OutboxAdmin.show', () => {
  it('shows one event whole, with its delivery map and failures; null for an unknown id', async () => {
    const [paid] = await emitAll([event('invoice.paid', { n: 5, card: 'declined' })]);
    const detail = await t.admin.show(paid);
    expect(detail).toMatchObject({
      id: paid,
      type: 'invoice.paid',
      payload: { n: 5, card: 'declined' },
      attempts: 1,
      failures: { billing: { count: 1, retryAt: null } },
      lastError: 'billing: Error: card ending 5 declined',
      dispatchedAt: null,
    });
    expect(Object.keys(detail!.deliveries).sort()).toEqual(['ledger', 'mailer']);
    expect(await t.admin.show('00000000-0000-4000-8000-000000000000')).toBeNull();
  });
});

describe('OutboxAdmin.partitions', () => {
  /** `count` due first tries of `partition` (its organization), the oldest `ago` ago. */
  async function due(partition: string | null, count: number, ago: string, key?: string) {
    await t.sql.query(
      `INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, organization_id,
                                 partition_key, payload, next_attempt_at)
       SELECT gen_random_uuid(), 'import.row', 'row', g::text, $1, $4, '{}',
              now() - $3::interval + g * interval '1 millisecond'
       FROM generate_series(1, $2::int) AS g`,
      [partition, count, ago, key ?? null],
    );
  }

  it('names the partitions with the most due first tries and with the oldest, and leaves out those with nothing due', async () => {
    await due('org-flood', 3_000, '1 minute');
    await due('org-old', 2, '1 hour');
    await due('org-quiet', 1, '1 second');
    await due('org-A', 4, '10 minutes', 'workspace:9');
    await due(null, 5, '2 minutes');
    // In flight, in backoff, retrying: no due first try.
    await t.sql.query(
      `INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, organization_id, payload,
                                 attempts, next_attempt_at, lease_expires_at, failures)
       VALUES (gen_random_uuid(), 'x', 'row', '1', 'org-leased', '{}', 1,
               now() + interval '1 minute', now() + interval '1 minute', '{}'),
              (gen_random_uuid(), 'x', 'row', '2', 'org-later', '{}', 0,
               now() + interval '1 hour', NULL, '{}'),
              (gen_random_uuid(), 'x', 'row', '3', 'org-retrying', '{}', 1,
               now() - interval '1 minute', NULL, '{"h": {"count": 1, "retryAt": null}}')`,
    );
    const top = await t.admin.partitions(3);
    expect(top.partitions).toBe(5);
    expect(top.complete).toBe(true);
    expect(top.byDue.map((p) => [p.partition, p.due])).toEqual([
      ['org-flood', 3_000],
      ['', 5],
      ['workspace:9', 4],
    ]);
    expect(top.byOldest.map((p) => p.partition)).toEqual(['org-old', 'workspace:9', '']);
    expect(top.byOldest[0].oldestDueWaitMs).toBeGreaterThan(59 * 60_000);
    expect(top.byDue.every((p) => !p.dueAtLeast)).toBe(true);
  });

  it('counts a partition up to 10,000 and says so', async () => {
    await due('org-flood', 10_001, '1 minute');
    const [flood] = (await t.admin.partitions()).byDue;
    expect(flood).toMatchObject({ partition: 'org-flood', due: 10_000, dueAtLeast: true });
  });
});

describe('OutboxAdmin refuses bad input before querying, naming the field and the value', () => {
  it.each([
    [
      'page.limit',
      () => t.admin.list({}, { limit: 0 }),
      'OutboxAdmin: page.limit must be an integer from 1 to 500, got 0',
    ],
    [
      'page.after',
      () => t.admin.list({}, { after: 'not-a-cursor' }),
      'OutboxAdmin: page.after must be a `next` cursor of list, got "not-a-cursor"',
    ],
    [
      'filter.deadAfter',
      () => t.admin.list({ deadAfter: new Date('nope') }),
      'OutboxAdmin: filter.deadAfter must be a valid Date, got Invalid Date',
    ],
    [
      'filter.types',
      () => t.admin.groups({ types: [''] }),
      'OutboxAdmin: filter.types must be a non-empty list of non-empty strings, got ',
    ],
    [
      'filter.types (empty)',
      () => t.admin.list({ types: [] }),
      'OutboxAdmin: filter.types must be a non-empty list of non-empty strings, got ',
    ],
    ['id', () => t.admin.show('42'), 'OutboxAdmin: id must be a UUID, got "42"'],
    [
      'top',
      () => t.admin.partitions(0),
      'OutboxAdmin: top must be an integer from 1 to 100, got 0',
    ],
  ])('%s', async (_field, call, message) => {
    expect((await adminRefusal(call)).message).toContain(message);
  });
});

describe('a group as a filter', () => {
  it('selects exactly the events of one group by its fingerprint, for a list, a count and a replay', async () => {
    await emitAll([
      ...Array.from({ length: 3 }, (_, n) => event('invoice.paid', { n, mail: 'down' })),
      event('invoice.paid', { n: 7, mail: 'down', card: 'declined' }),
      event('invoice.paid', { n: 8, card: 'declined' }),
    ]);
    const groups = await t.admin.groups({ types: ['invoice.paid'] });
    const mail = groups.find((g) => g.handler === 'mailer')!;
    const card = groups.find((g) => g.handler === 'billing')!;
    expect([mail.count, card.count]).toEqual([4, 2]);

    const listed = await t.admin.list({ fingerprint: mail.fingerprint, handler: 'mailer' });
    expect(listed.items).toHaveLength(4);
    const cards = await t.admin.list({ fingerprint: card.fingerprint });
    expect(cards.items.map((i) => (i.lastError ?? '').includes('declined'))).toEqual([true, true]);
    // The event that failed both ways belongs to both groups, and each group counts it once.
    expect(await t.admin.groups({ fingerprint: card.fingerprint })).toMatchObject([
      { handler: 'billing', count: 2 },
    ]);
    const dry = await t.admin.replay(
      { filter: { types: ['invoice.paid'], handler: 'billing', fingerprint: card.fingerprint } },
      { dryRun: true },
    );
    expect(dry.ids.sort()).toEqual(cards.items.map((i) => i.id).sort());
    await expect(t.admin.list({ fingerprint: 'not-one' })).rejects.toThrow(
      /filter\.fingerprint must be a fingerprint of groups/,
    );
  });
});
