import { Injectable } from '@nestjs/common';
import {
  OnOutboxEvent,
  OutboxAdmin,
  OutboxEngine,
  OutboxHealthIndicator,
  type HandlerContext,
  type NewOutboxEvent,
  type OutboxEvent,
} from '@app/outbox';
import { emitCommitted, useOutboxApp } from './support/outbox-app';

/**
 * Ordered handlers through the module, drained by hand: each key's events reach an ordered
 * handler in their places, a failing event holds the ones behind it until it is delivered, and
 * a handler that is not ordered runs at once.
 */

const calls: Array<{ handler: string; key: string; n: number; attempt: number }> = [];
const failFirst = new Set<number>();
const failAlways = new Set<number>();
const mailerFails = new Set<number>();

@Injectable()
class Handlers {
  @OnOutboxEvent('ledger', {
    events: ['account.credited', 'account.noted', 'account.journaled'],
    ordered: true,
  })
  ledger(event: OutboxEvent<{ n: number }>, ctx: HandlerContext) {
    calls.push({
      handler: 'ledger',
      key: event.orderingKey,
      n: event.payload.n,
      attempt: ctx.handlerAttempt,
    });
    if (ctx.handlerAttempt === 1 && failFirst.has(event.payload.n)) throw new Error('not yet');
    if (failAlways.has(event.payload.n)) throw new Error('poison');
  }

  @OnOutboxEvent('journal', { events: ['account.journaled', 'account.booked'], ordered: true })
  journal(event: OutboxEvent<{ n: number }>, ctx: HandlerContext) {
    calls.push({
      handler: 'journal',
      key: event.orderingKey,
      n: event.payload.n,
      attempt: ctx.handlerAttempt,
    });
  }

  @OnOutboxEvent('mailer', { events: ['account.noted'] })
  mailer(event: OutboxEvent<{ n: number }>, ctx: HandlerContext) {
    calls.push({
      handler: 'mailer',
      key: event.orderingKey,
      n: event.payload.n,
      attempt: ctx.handlerAttempt,
    });
    if (mailerFails.has(event.payload.n)) throw new Error('mail server down');
  }
}

const t = useOutboxApp({
  outbox: {
    autoStart: false,
    retry: { baseMs: 1, maxMs: 1, jitter: 0 },
    maxAttempts: 2,
    deadRetryMs: 0,
    retention: { enabled: false },
  },
  providers: [Handlers],
});

function event(key: string, n: number, type = 'account.credited'): NewOutboxEvent {
  return { type, aggregateType: 'account', aggregateId: 'a', orderingKey: key, payload: { n } };
}

async function emit(events: NewOutboxEvent[]): Promise<void> {
  await emitCommitted(t.app, events);
}

/** Drains until nothing is left to deliver; retries are due after 1 ms. */
async function drainUntilDone(): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const report = await t.app.get(OutboxEngine).drainOnce();
    if (!report.ok) throw report.error ?? new Error('drain failed');
    const { rows } = await t.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM outbox_event WHERE dispatched_at IS NULL AND dead_at IS NULL`,
    );
    if (rows[0].n === 0) return;
    if (report.claimed === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error('the outbox did not drain');
}

it("runs an ordered handler on each key's events in their places, a failure holding the rest", async () => {
  failFirst.add(2);
  await emit([event('k1', 1), event('k1', 2)]);
  await emit([event('k2', 1)]);
  await emit([event('k1', 3), event('k1', 4, 'account.noted')]);
  await emit([event('k2', 2)]);
  await drainUntilDone();

  const ledger = (key: string) =>
    calls.filter((c) => c.handler === 'ledger' && c.key === key).map((c) => [c.n, c.attempt]);
  expect(ledger('k1')).toEqual([
    [1, 1],
    [2, 1],
    [2, 2],
    [3, 1],
    [4, 1],
  ]);
  expect(ledger('k2')).toEqual([
    [1, 1],
    [2, 1],
    [2, 2],
  ]);
  // The mailer is not ordered: it ran once, whatever ledger's place for the event.
  expect(calls.filter((c) => c.handler === 'mailer').map((c) => [c.key, c.n])).toEqual([['k1', 4]]);
  const { rows } = await t.sql.query(
    `SELECT handler, key, waiting::int AS waiting FROM outbox_ordering_wait ORDER BY key`,
  );
  expect(rows).toEqual([
    { handler: 'ledger', key: 'k1', waiting: 0 },
    { handler: 'ledger', key: 'k2', waiting: 0 },
  ]);
});

/** Drains until a drain claims nothing and nothing is due within the retry backoff. */
async function drainUntilQuiet(): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const report = await t.app.get(OutboxEngine).drainOnce();
    if (!report.ok) throw report.error ?? new Error('drain failed');
    if (report.claimed > 0) continue;
    const { rows } = await t.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM outbox_event
       WHERE dispatched_at IS NULL AND dead_at IS NULL
         AND next_attempt_at < now() + interval '1 second'`,
    );
    if (rows[0].n === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error('the outbox did not come to rest');
}

it('holds a key behind its dead event until an operator discards it', async () => {
  calls.length = 0;
  failAlways.add(10);
  await emit([event('k3', 10), event('k3', 11)]);
  await drainUntilQuiet();
  const dead = await t.sql.query<{ id: string }>(
    `SELECT id FROM outbox_event WHERE dead_at IS NOT NULL AND ordering_key = 'k3'`,
  );
  expect(dead.rows).toHaveLength(1);
  expect(calls.filter((c) => c.key === 'k3').map((c) => c.n)).toEqual([10, 10]);
  const admin = t.app.get(OutboxAdmin);
  expect(await admin.blockedKeys()).toEqual({
    items: [
      {
        handler: 'ledger',
        key: 'k3',
        eventId: dead.rows[0].id,
        since: expect.any(Date),
        lastError: 'Error: poison',
        waiting: 1,
      },
    ],
    next: null,
  });

  await t.app.get(OutboxAdmin).discard({ ids: [dead.rows[0].id] }, { reason: 'poison' });
  await drainUntilDone();
  expect(calls.filter((c) => c.key === 'k3').map((c) => c.n)).toEqual([10, 10, 11]);
});

it('lists blocked keys by handler and key, page by page, and unblocks a key whose head a replay delivers', async () => {
  calls.length = 0;
  failAlways.add(20);
  failAlways.add(30);
  await emit([event('k4', 20), event('k4', 21), event('k4', 22)]);
  await emit([event('k5', 30), event('k5', 31)]);
  await drainUntilQuiet();
  const admin = t.app.get(OutboxAdmin);
  const all = await admin.blockedKeys();
  expect(all.items.map((b) => [b.key, b.waiting])).toEqual([
    ['k4', 2],
    ['k5', 1],
  ]);
  const first = await admin.blockedKeys({ limit: 1 });
  expect(first.items.map((b) => b.key)).toEqual(['k4']);
  const second = await admin.blockedKeys({ limit: 1, after: first.next! });
  expect(second).toEqual({ items: [all.items[1]], next: null });
  expect((await admin.blockedKeys({ key: 'k5' })).items).toEqual([all.items[1]]);
  expect((await admin.blockedKeys({ handler: 'mailer' })).items).toEqual([]);

  const health = async () => (await t.app.get(OutboxHealthIndicator).isHealthy()).outbox;
  expect(await health()).toMatchObject({ blockedKeys: 2, orderedWaitMs: null });

  failAlways.delete(20);
  await admin.replay({ ids: [all.items[0].eventId] });
  await drainUntilQuiet();
  expect(calls.filter((c) => c.key === 'k4').map((c) => c.n)).toEqual([20, 20, 20, 21, 22]);
  expect((await admin.blockedKeys()).items.map((b) => b.key)).toEqual(['k5']);
  expect(await health()).toMatchObject({ blockedKeys: 1 });
  const { rows } = await t.sql.query(
    `SELECT key, waiting::int AS waiting FROM outbox_ordering_wait WHERE key IN ('k4', 'k5') ORDER BY key`,
  );
  expect(rows).toEqual([
    { key: 'k4', waiting: 0 },
    { key: 'k5', waiting: 2 },
  ]);
});

it('refuses a blocked-keys query it cannot read, naming the field', async () => {
  const admin = t.app.get(OutboxAdmin);
  await expect(admin.blockedKeys({ limit: 0 })).rejects.toThrow(/filter\.limit/);
  await expect(admin.blockedKeys({ after: 'nope' })).rejects.toThrow(/filter\.after/);
  await expect(admin.blockedKeys({ key: '' })).rejects.toThrow(/filter\.key/);
  await expect(
    admin.blockedKeys({ handlers: 'ledger' } as unknown as { handler: string }),
  ).rejects.toThrow(/filter\.handlers/);
});

it('lists a key once, at its head, when an event behind the head is dead for another handler', async () => {
  calls.length = 0;
  failAlways.add(40);
  mailerFails.add(41);
  await emit([event('k6', 40), event('k6', 41, 'account.noted')]);
  await drainUntilQuiet();
  const admin = t.app.get(OutboxAdmin);
  const blocked = await admin.blockedKeys({ key: 'k6' });
  expect(blocked.items.map((b) => [b.handler, b.waiting])).toEqual([['ledger', 1]]);
  // Each handler's runs are in order; the two handlers' runs interleave as they please.
  const runsOf = (handler: string) =>
    calls.filter((c) => c.key === 'k6' && c.handler === handler).map((c) => c.n);
  expect(runsOf('ledger')).toEqual([40, 40]);
  expect(runsOf('mailer')).toEqual([41, 41]);
  // The event behind waits for the head without coming back to a claim in the meantime.
  const behind = `SELECT attempts, dead_at IS NOT NULL AS dead FROM outbox_event
                  WHERE ordering_key = 'k6' AND payload->>'n' = '41'`;
  expect((await t.sql.query(behind)).rows).toEqual([{ attempts: 3, dead: false }]);

  await admin.discard({ ids: [blocked.items[0].eventId] }, { reason: 'poison' });
  await drainUntilQuiet();
  expect(runsOf('ledger')).toEqual([40, 40, 41]);
  // Delivered to the ledger, it is dead for the mailer alone.
  expect((await t.sql.query(behind)).rows).toEqual([{ attempts: 4, dead: true }]);
});

it('reports in health how long the oldest head retried by an ordered handler has held its key', async () => {
  failFirst.add(60);
  await emit([event('k7', 60), event('k7', 61)]);
  await t.sql.query(
    `UPDATE outbox_event SET occurred_at = now() - interval '1 minute' WHERE ordering_key = 'k7'`,
  );
  const report = await t.app.get(OutboxEngine).drainOnce();
  expect(report.ok).toBe(true);
  const { outbox } = await t.app.get(OutboxHealthIndicator).isHealthy();
  expect(outbox.orderedWaitMs).toBeGreaterThanOrEqual(60_000);
  expect(outbox.orderedWaitMs).toBeLessThan(120_000);
  await drainUntilQuiet();
  expect((await t.app.get(OutboxHealthIndicator).isHealthy()).outbox.orderedWaitMs).toBeNull();
});

it('keeps each ordered handler of an event to its own order: one retrying does not hold the other', async () => {
  calls.length = 0;
  failFirst.add(80);
  await emit([event('k8', 80, 'account.journaled'), event('k8', 81, 'account.journaled')]);
  await drainUntilQuiet();
  const of = (handler: string) =>
    calls.filter((c) => c.key === 'k8' && c.handler === handler).map((c) => [c.n, c.attempt]);
  expect(of('journal')).toEqual([
    [80, 1],
    [81, 1],
  ]);
  expect(of('ledger')).toEqual([
    [80, 1],
    [80, 2],
    [81, 1],
  ]);
});

it('runs an ordered handler on past an event another ordered handler is held on', async () => {
  calls.length = 0;
  failAlways.add(90);
  await emit([
    event('k9', 90),
    event('k9', 91, 'account.journaled'),
    event('k9', 92, 'account.booked'),
  ]);
  await drainUntilQuiet();
  const of = (handler: string) =>
    calls.filter((c) => c.key === 'k9' && c.handler === handler).map((c) => c.n);
  // The ledger is blocked on 90 (dead) and holds 91 for itself only: the journal ran 91 and 92.
  expect(of('ledger')).toEqual([90, 90]);
  expect(of('journal')).toEqual([91, 92]);
  const state = async () =>
    (
      await t.sql.query(
        `SELECT payload->>'n' AS n, dispatched_at IS NOT NULL AS delivered, ordered_for
         FROM outbox_event WHERE ordering_key = 'k9' ORDER BY ordering_position`,
      )
    ).rows;
  // The last settle may still be on its way when the drain comes to rest.
  for (let i = 0; i < 100 && !(await state())[2].delivered; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  expect(await state()).toEqual([
    { n: '90', delivered: false, ordered_for: ['ledger'] },
    { n: '91', delivered: false, ordered_for: ['ledger'] },
    { n: '92', delivered: true, ordered_for: ['journal'] },
  ]);
});
