import { Injectable } from '@nestjs/common';
import {
  InvalidOutboxAdminQueryError,
  OnOutboxEvent,
  OUTBOX_EVENT_DISCARDED,
  OUTBOX_EVENT_REPLAYED,
  OutboxLeaseStore,
  type NewOutboxEvent,
  type OutboxEvent,
} from '@app/outbox';
import { RetentionStore } from '@app/outbox/store/retention.store';
import { drainUntilIdle } from '@app/outbox/testing';
import {
  adminRefusal,
  insertDeadRows,
  useAdminApp,
  waitingForReplay,
} from './support/admin-fixture';
import { failedSettle } from './support/outbox-stores';
import { emitCommitted } from './support/outbox-app';
import { memberInvited } from './support/events';

/**
 * OutboxAdmin.replay and discard on events that really died, the automatic dead replays turned
 * off, and discarded events swept: what an operator does after an outage, without SQL.
 */

/** The outage: which handlers fail right now. */
const down = new Set<string>();
/** Handler runs, by handler name. */
const runs = new Map<string, number>();

function run(name: string): void {
  runs.set(name, (runs.get(name) ?? 0) + 1);
  if (down.has(name)) throw new Error(`${name} upstream 503`);
}

@Injectable()
class Handlers {
  @OnOutboxEvent('mailer', { events: ['invoice.paid', 'member.invited'] })
  mailer() {
    run('mailer');
  }

  @OnOutboxEvent('billing', { events: ['invoice.paid'] })
  billing() {
    run('billing');
  }

  @OnOutboxEvent('ledger', { events: ['invoice.paid'] })
  ledger() {
    run('ledger');
  }

  /** Audit: sees every replay and discard. */
  @OnOutboxEvent('audit', { events: [OUTBOX_EVENT_REPLAYED, OUTBOX_EVENT_DISCARDED] })
  audit(event: OutboxEvent<Record<string, unknown>>) {
    audited.push({ type: event.type, payload: event.payload });
  }
}

const audited: { type: string; payload: Record<string, unknown> }[] = [];

const t = useAdminApp({
  testing: { maxAttempts: 1, deadRetryByType: { 'member.invited': 0 } },
  providers: [Handlers],
  truncateEach: ['outbox_event'],
});

beforeEach(() => {
  down.clear();
  runs.clear();
  audited.length = 0;
});

const paid = (n: number): NewOutboxEvent => ({
  type: 'invoice.paid',
  aggregateType: 'invoice',
  aggregateId: `inv-${n}`,
  organizationId: 'org-1',
  payload: { n },
});

/** Emits and drains with `failing` down: the events die for those handlers. */
async function emitDead(events: NewOutboxEvent[], failing: string[]): Promise<string[]> {
  failing.forEach((name) => down.add(name));
  const ids = await emitCommitted(t.app, events);
  await drainUntilIdle(t.app);
  down.clear();
  runs.clear();
  return ids;
}

interface Row {
  dead_at: Date | null;
  dispatched_at: Date | null;
  discarded_at: Date | null;
  discard_reason: string | null;
  next_attempt_at: Date;
  deliveries: Record<string, string>;
}

async function row(id: string): Promise<Row> {
  const [found] = await t.db.dataSource.query<Row[]>(
    `SELECT dead_at, dispatched_at, discarded_at, discard_reason, next_attempt_at, deliveries
     FROM outbox_event WHERE id = $1`,
    [id],
  );
  return found;
}

/** What a change by ids answers: `ids` changed (invoices), the others given `unchanged`. */
const changed = (ids: string[], unchanged: string[] = []) => ({
  dryRun: false,
  count: ids.length,
  countsByType: ids.length > 0 ? { 'invoice.paid': ids.length } : {},
  sampleIds: ids,
  ids,
  unchanged,
  cursor: null,
  stoppedBy: null,
});

const recorded = (type: string) =>
  t.db.dataSource.query<{ payload: Record<string, unknown>; causation_id: string }[]>(
    'SELECT payload, causation_id FROM outbox_event WHERE type = $1 ORDER BY aggregate_id',
    [type],
  );

describe('OutboxAdmin.replay', () => {
  it('makes dead events due now: after the outage only the handler that failed runs, and the replay is recorded', async () => {
    const [dead, delivered] = await emitDead([paid(1), paid(2)], ['mailer']);
    // The second event was delivered by the time the test replays it: it is reported unchanged.
    await t.db.dataSource.query(`UPDATE outbox_event SET dispatched_at = now() WHERE id = $1`, [
      delivered,
    ]);
    const unknown = '0190a0a0-0000-7000-8000-000000000000';

    const result = await t.admin.replay({ ids: [dead, delivered, unknown] }, { actor: 'ops:ana' });
    expect(result).toEqual(changed([dead], [delivered, unknown]));
    expect((await row(dead)).next_attempt_at.getTime()).toBeLessThanOrEqual(Date.now() + 1000);

    await drainUntilIdle(t.app);
    expect(Object.fromEntries(runs)).toEqual({ mailer: 1 });
    expect((await row(dead)).dispatched_at).not.toBeNull();
    expect(await recorded(OUTBOX_EVENT_REPLAYED)).toEqual([
      {
        payload: {
          eventId: dead,
          type: 'invoice.paid',
          aggregateType: 'invoice',
          aggregateId: 'inv-1',
          handlers: null,
          actor: 'ops:ana',
        },
        causation_id: dead,
      },
    ]);
    expect(audited.map((a) => a.type)).toEqual([OUTBOX_EVENT_REPLAYED]);
  });

  it('reruns only the handlers named, and the event stays dead for the others', async () => {
    const [id] = await emitDead([paid(1)], ['mailer', 'billing']);
    expect(await t.admin.replay({ ids: [id] }, { rerun: ['billing'] })).toMatchObject({
      ids: [id],
    });
    await drainUntilIdle(t.app);
    expect(Object.fromEntries(runs)).toEqual({ billing: 1 });
    const after = await row(id);
    expect(Object.keys(after.deliveries).sort()).toEqual(['billing', 'ledger']);
    expect(after.dead_at).not.toBeNull();
    expect(after.dispatched_at).toBeNull();

    // A later replay of every handler left runs the mailer, which the named replay left out.
    await t.admin.replay({ ids: [id] });
    await drainUntilIdle(t.app);
    expect(Object.fromEntries(runs)).toEqual({ billing: 1, mailer: 1 });
    expect((await row(id)).dispatched_at).not.toBeNull();

    // A handler that already delivered the event selects nothing; `handlers`, the former name
    // of `rerun`, still names them.
    const [other] = await emitDead([paid(2)], ['mailer']);
    expect(await t.admin.replay({ ids: [other] }, { handlers: ['ledger'] })).toEqual(
      changed([], [other]),
    );
    // Both names at once is refused before anything changes.
    await expect(
      t.admin.replay({ ids: [other] }, { rerun: ['mailer'], handlers: ['mailer'] }),
    ).rejects.toThrow(/options\.handlers .*absent when options\.rerun is given/);
    await expect(t.admin.replay({ ids: [other] }, { rerun: [] })).rejects.toThrow(/options\.rerun/);
    expect((await row(other)).dead_at).not.toBeNull();
  });

  it('selects by filter, in batches, every matching event once; a dry run changes nothing', async () => {
    await emitDead(
      Array.from({ length: 3 }, (_, n) => paid(n)),
      ['billing'],
    );
    // 1,200 more dead rows, more than two batches of the admin's 500.
    await insertDeadRows(t.db.dataSource, 'member.invited', 1200, 'member');

    const dry = await t.admin.replay({ filter: { types: ['member.invited'] } }, { dryRun: true });
    expect(dry.dryRun).toBe(true);
    expect(dry).toMatchObject({
      count: 1200,
      countsByType: { 'member.invited': 1200 },
      cursor: null,
      stoppedBy: null,
    });
    // A sample of the ids, in id order.
    expect(dry.sampleIds).toHaveLength(100);
    expect(dry.sampleIds).toEqual([...dry.sampleIds].sort());
    expect(await recorded(OUTBOX_EVENT_REPLAYED)).toEqual([]);
    expect(await waitingForReplay(t.db.dataSource)).toBe(1200);

    const done = await t.admin.replay({ filter: { types: ['member.invited'] } });
    expect(done).toMatchObject({ count: 1200, sampleIds: dry.sampleIds, cursor: null });
    const replayed = await recorded(OUTBOX_EVENT_REPLAYED);
    expect(replayed).toHaveLength(1200);
    expect(new Set(replayed.map((r) => r.payload.eventId)).size).toBe(1200);
    const [{ due }] = await t.db.dataSource.query<{ due: number }[]>(
      `SELECT count(*)::int AS due FROM outbox_event
       WHERE type = 'member.invited' AND next_attempt_at <= now()`,
    );
    expect(due).toBe(1200);

    // The invoices were not selected.
    const { items } = await t.admin.list({ types: ['invoice.paid'] });
    expect(items).toHaveLength(3);
    expect(items.every((i) => i.nextAttemptAt!.getTime() > Date.now() + 3_600_000)).toBe(true);
  });

  it('refuses a misspelt filter key before writing anything: a replay of one type does not replay them all', async () => {
    const [invoice] = await emitDead([paid(1)], ['mailer']);
    const before = await row(invoice);
    await expect(
      t.admin.replay({ filter: { type: 'no.such.type' } as never }, { handlers: ['mailer'] }),
    ).rejects.toThrow(
      'OutboxAdmin: filter.type must be left out: filter has types, handler, fingerprint',
    );
    await expect(
      t.admin.discard({ filter: { typ: 'x' } as never }, { reason: 'x' }),
    ).rejects.toThrow(InvalidOutboxAdminQueryError);
    await expect(t.admin.list({ type: 'no.such.type' } as never)).rejects.toThrow(/filter\.type/);
    await expect(t.admin.list({}, { limit: 5, cursor: 'x' } as never)).rejects.toThrow(
      /page\.cursor/,
    );
    expect(await row(invoice)).toEqual(before);
  });

  it('refuses a filter with no condition unless all is set, before writing anything', async () => {
    const [id] = await emitDead([paid(1)], ['mailer']);
    const before = await row(id);
    await expect(t.admin.replay({ filter: {} })).rejects.toThrow(InvalidOutboxAdminQueryError);
    await expect(t.admin.replay({ filter: { includeDiscarded: true } })).rejects.toThrow(
      /selector\.filter must be a filter with at least one condition, or `all: true`/,
    );
    expect(await row(id)).toEqual(before);
    expect((await t.admin.replay({ filter: {}, all: true })).ids).toEqual([id]);
  });
});

describe('OutboxAdmin.discard', () => {
  it('sets dead events aside: never replayed, out of the dead count, listed on request, recorded with the reason', async () => {
    const [gone, kept] = await emitDead([paid(1), paid(2)], ['mailer']);
    const result = await t.admin.discard(
      { ids: [gone] },
      { reason: 'customer deleted', actor: 'ops:ana' },
    );
    expect(result).toEqual(changed([gone]));

    // Even once its replay time has passed, no claim takes it.
    await t.db.dataSource.query(
      `UPDATE outbox_event SET next_attempt_at = now() - interval '1 hour'`,
    );
    await drainUntilIdle(t.app);
    expect(runs.get('mailer')).toBe(1); // the kept one, replayed
    expect((await row(gone)).dispatched_at).toBeNull();

    expect((await t.admin.list()).items.map((i) => i.id)).toEqual([]);
    const listed = await t.admin.list({ includeDiscarded: true });
    expect(listed.items).toMatchObject([
      { id: gone, state: 'discarded', discardReason: 'customer deleted', nextAttemptAt: null },
    ]);
    expect((await t.admin.show(gone))!.discardReason).toBe('customer deleted');
    expect((await row(kept)).dispatched_at).not.toBeNull();

    const state = await t.app.get(OutboxLeaseStore).pendingState();
    expect(state.ok && state.value.dead).toBe(0);
    expect(await recorded(OUTBOX_EVENT_DISCARDED)).toEqual([
      {
        payload: {
          eventId: gone,
          type: 'invoice.paid',
          aggregateType: 'invoice',
          aggregateId: 'inv-1',
          reason: 'customer deleted',
          actor: 'ops:ana',
        },
        causation_id: gone,
      },
    ]);

    // Discarding again changes nothing; a replay by id restores it.
    expect(await t.admin.discard({ ids: [gone] }, { reason: 'again' })).toMatchObject({
      ids: [],
      unchanged: [gone],
    });
    expect((await t.admin.replay({ ids: [gone] })).ids).toEqual([gone]);
    await drainUntilIdle(t.app);
    expect(await row(gone)).toMatchObject({ discarded_at: null, discard_reason: null });
    expect((await row(gone)).dispatched_at).not.toBeNull();
  });

  it('discards a retrying event named by id, which then stops retrying', async () => {
    const slow = await emitCommitted(t.app, paid(7));
    // A failed attempt that will retry: the handler's retry time is in the future.
    await t.db.dataSource.query(
      `UPDATE outbox_event
       SET attempts = 1, next_attempt_at = now() + interval '1 hour', last_error = 'mailer: 503',
           failures = jsonb_build_object('mailer', jsonb_build_object('count', 1,
                        'retryAt', now() + interval '1 hour'))
       WHERE id = $1`,
      [slow],
    );
    expect((await t.admin.discard({ ids: [slow] }, { reason: 'poison' })).ids).toEqual([slow]);
    const after = await row(slow);
    expect(after.dead_at).not.toBeNull();
    expect(after.discarded_at).not.toBeNull();
    await t.db.dataSource.query(`UPDATE outbox_event SET next_attempt_at = now() WHERE id = $1`, [
      slow,
    ]);
    await drainUntilIdle(t.app);
    expect(runs.size).toBe(0);
  });

  it('leaves an event alone while a relay runs it', async () => {
    const [id] = await emitDead([paid(1)], ['mailer']);
    await t.db.dataSource.query(
      `UPDATE outbox_event SET lease_expires_at = now() + interval '1 minute' WHERE id = $1`,
      [id],
    );
    expect(await t.admin.discard({ ids: [id] }, { reason: 'x' })).toMatchObject({ ids: [] });
    expect(await t.admin.replay({ ids: [id] })).toMatchObject({ ids: [] });
    // A lease that ran out (its relay died) protects nothing.
    await t.db.dataSource.query(
      `UPDATE outbox_event SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [id],
    );
    expect(await t.admin.discard({ ids: [id] }, { reason: 'x' })).toMatchObject({ ids: [id] });
  });

  it("ends a lease that ran out, so the stalled relay's late failure cannot undo the replay", async () => {
    const [id] = await emitDead([paid(1)], ['mailer']);
    // A replay of the dead event was claimed, and its relay stalled past the lease.
    await t.db.dataSource.query(
      `UPDATE outbox_event SET attempts = attempts + 1,
              lease_expires_at = now() - interval '1 second',
              next_attempt_at = now() - interval '1 second'
       WHERE id = $1`,
      [id],
    );
    const [{ attempts }] = await t.db.dataSource.query<{ attempts: number }[]>(
      'SELECT attempts FROM outbox_event WHERE id = $1',
      [id],
    );
    expect((await t.admin.replay({ ids: [id] }, { handlers: ['mailer'] })).ids).toEqual([id]);
    const late = await t.app.get(OutboxLeaseStore).markFailed(
      [
        failedSettle({
          id,
          attempts,
          failedHandlers: ['mailer'],
          error: new Error('late'),
          dead: true,
          failures: [{ handler: 'mailer', count: 2, delayMs: null }],
        }),
      ],
      { deadRetryMs: Infinity },
    );
    expect(late).toEqual({
      ok: true,
      value: { settled: [], stale: [id], newlyDead: [], retryFrom: null },
    });
    await drainUntilIdle(t.app);
    expect(Object.fromEntries(runs)).toEqual({ mailer: 1 });
    expect((await row(id)).dispatched_at).not.toBeNull();
  });

  it('selects no event for a handler name that has not failed it', async () => {
    const [id] = await emitDead([paid(1)], ['mailer']);
    expect(await t.admin.replay({ ids: [id] }, { handlers: ['no-such-handler'] })).toEqual(
      changed([], [id]),
    );
    const [{ failures }] = await t.db.dataSource.query<{ failures: object }[]>(
      'SELECT failures FROM outbox_event WHERE id = $1',
      [id],
    );
    expect(Object.keys(failures)).toEqual(['mailer']);
  });

  it('is swept once kept past its retention; dead events are not', async () => {
    const [old, recent, dead] = await emitDead([paid(1), paid(2), paid(3)], ['mailer']);
    await t.admin.discard({ ids: [old, recent] }, { reason: 'obsolete' });
    await t.db.dataSource.query(
      `UPDATE outbox_event SET discarded_at = now() - interval '31 days' WHERE id = $1`,
      [old],
    );
    const swept = await t.app
      .get(RetentionStore)
      .sweepDiscarded({ retentionMs: 30 * 86_400_000, batchSize: 10 });
    expect(swept).toEqual({ ok: true, value: 1 });
    expect(await row(old)).toBeUndefined();
    expect(await row(recent)).toBeDefined();
    expect(await row(dead)).toBeDefined();
  });

  it.each([
    ['options.reason', 'empty', { reason: '' }],
    ['options.reason', 'blank', { reason: '   ' }],
    ['options.reason', 'over 500 characters', { reason: 'x'.repeat(501) }],
    ['options.actor', 'empty', { reason: 'ok', actor: '' }],
    ['options.dryRun', 'not a boolean', { reason: 'ok', dryRun: 'yes' }],
  ])('refuses %s %s, naming it', async (field, _why, options) => {
    const error = await adminRefusal(() =>
      t.admin.discard({ ids: ['0190a0a0-0000-7000-8000-000000000000'] }, options as never),
    );
    expect(error.field).toBe(field);
  });

  it.each([
    [{ ids: [] }, 'selector.ids'],
    [{ ids: ['nope'] }, 'selector.ids'],
    [{ filter: { types: [] } }, 'filter.types'],
    [{ filter: { types: ['a'] }, all: 'yes' }, 'selector.all'],
    [{}, 'selector'],
    // Misspelt keys, which would otherwise be ignored and widen the change to every type.
    [{ filter: { type: 'invoice.paid', handler: 'mailer' } }, 'filter.type'],
    [{ filter: { types: ['invoice.paid'] }, everything: true }, 'selector.everything'],
    [
      { ids: ['0190a0a0-0000-7000-8000-000000000000'], filter: { types: ['a'] } },
      'selector.filter',
    ],
  ])('refuses the selector %j naming %s', async (selector, field) => {
    expect((await adminRefusal(() => t.admin.replay(selector as never))).field).toBe(field);
  });
});

describe('automatic dead replays turned off', () => {
  it('leaves a dead event of a type with deadRetryByType 0 waiting for a replay, and the plans and counts still work', async () => {
    const [invited] = await emitDead([memberInvited()], ['mailer']);
    const [invoice] = await emitDead([paid(1)], ['mailer']);
    const waiting = await t.admin.show(invited);
    expect(waiting!.deadAt).not.toBeNull();
    expect(waiting!.nextAttemptAt).toBeNull();
    // The invoice keeps the default: replayed in 6 hours.
    expect((await t.admin.show(invoice))!.nextAttemptAt!.getTime()).toBeGreaterThan(
      Date.now() + 5 * 3_600_000,
    );

    const repository = t.app.get(OutboxLeaseStore);
    await t.db.dataSource.query(`DELETE FROM outbox_event WHERE id = $1`, [invoice]);
    await t.db.dataSource.query(`DELETE FROM outbox_event WHERE type <> 'member.invited'`);
    expect(await repository.nextDue()).toEqual({ ok: true, value: null });
    const state = await repository.pendingState();
    expect(state.ok && state.value).toMatchObject({ dead: 1, nextDueInMs: null });
    const exact = await repository.exactState();
    expect(exact.ok && exact.value).toMatchObject({ dead: 1, nextDueInMs: null });

    await t.admin.replay({ ids: [invited] });
    await drainUntilIdle(t.app);
    expect(Object.fromEntries(runs)).toEqual({ mailer: 1 });
    expect((await row(invited)).dispatched_at).not.toBeNull();
  });
});
