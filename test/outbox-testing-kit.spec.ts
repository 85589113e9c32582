import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  OutboxEngine,
  OutboxPublisher,
  type OutboxEvent,
  type TransactionalHandlerContext,
} from '@app/outbox';
import {
  drainUntilIdle,
  emitted,
  expectEmitted,
  expectNotEmitted,
  InvalidOutboxTestingOptionError,
  makeDue,
  OutboxExpectationError,
  OutboxNotIdleError,
  outboxTestingOptions,
} from '@app/outbox/testing';
import { invoicePaid } from './support/events';
import { emitCommitted, useOutboxApp } from './support/outbox-app';

/** The testing kit (`nestjs-lease-outbox/testing`) as an app's tests use it. */

const calls: { handler: string; type: string; id: string }[] = [];
/** Failures left to throw, per handler. */
const failuresLeft: Record<string, number> = {};

function run(handler: string, event: OutboxEvent): void {
  calls.push({ handler, type: event.type, id: event.id });
  if ((failuresLeft[handler] ?? 0) > 0) {
    failuresLeft[handler] -= 1;
    throw new Error(`${handler} failed on purpose`);
  }
}

@Injectable()
class Handlers {
  @OnOutboxEvent('ledger', { events: ['invoice.paid'], retry: [3_600_000] })
  ledger(event: OutboxEvent) {
    run('ledger', event);
  }

  @OnOutboxEvent('receipts', { events: ['invoice.paid'], transaction: true })
  async receipts(event: OutboxEvent, ctx: TransactionalHandlerContext) {
    run('receipts', event);
    await ctx.emit({
      type: 'receipt.sent',
      aggregateType: 'invoice',
      aggregateId: event.aggregateId,
      payload: { invoice: event.aggregateId },
    });
  }

  @OnOutboxEvent('mailer', { events: ['receipt.sent'] })
  mailer(event: OutboxEvent) {
    run('mailer', event);
  }

  @OnOutboxEvent('echo', { events: ['echo'], transaction: true })
  async echo(event: OutboxEvent, ctx: TransactionalHandlerContext) {
    await ctx.emit({ type: 'echo', aggregateType: 'echo', aggregateId: event.id, payload: {} });
  }
}

const t = useOutboxApp(
  {
    outbox: outboxTestingOptions({ handlers: { ledger: { maxAttempts: 3 } } }),
    providers: [Handlers],
  },
  { truncateEach: ['outbox_event'] },
);
let dataSource: DataSource;
let publisher: OutboxPublisher;

beforeAll(() => {
  dataSource = t.app.get(DataSource);
  publisher = t.app.get(OutboxPublisher);
});

beforeEach(() => {
  calls.length = 0;
  for (const name of Object.keys(failuresLeft)) delete failuresLeft[name];
});

const emit = (overrides: Parameters<typeof invoicePaid>[0] = {}) =>
  emitCommitted(t.app, invoicePaid(overrides));

describe('outboxTestingOptions', () => {
  it('keeps the engine, its LISTEN connection and its timers off until a test drains', async () => {
    const engine = t.app.get(OutboxEngine);
    expect(engine.state).toBe('idle');
    expect(engine.listenerState).toBe('disabled');
    const listening = await dataSource.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND query ILIKE 'LISTEN%'`,
    );
    expect(listening[0].n).toBe(0);
    await emit();
    expect(calls).toEqual([]);
  });
});

describe('expectEmitted / expectNotEmitted / emitted', () => {
  it("sees what a service wrote in its transaction before it commits, through that transaction's manager", async () => {
    await dataSource.transaction(async (manager) => {
      await publisher.emit(invoicePaid({ payload: { amount: 250, lines: [{ sku: 'a' }] } }), {
        manager,
      });
      const event = await expectEmitted(manager, {
        type: 'invoice.paid',
        payload: { amount: 250, lines: [{ sku: 'a' }] },
      });
      expect(event).toMatchObject({
        aggregateType: 'invoice',
        deliveredTo: [],
        dispatchedAt: null,
      });
      // Not committed: another connection sees nothing yet.
      await expectNotEmitted(dataSource, { type: 'invoice.paid' });
    });
    expect(await emitted(dataSource, { type: 'invoice.paid' })).toHaveLength(1);
  });

  it('matches the payload as a partial, and says what was emitted instead without printing payloads', async () => {
    await emit({ aggregateId: 'inv-7', payload: { amount: 100, card: 'secret-4242' } });
    await expectEmitted(dataSource, { type: 'invoice.paid', payload: { amount: 100 } });

    const error = await expectEmitted(dataSource, {
      type: 'invoice.paid',
      payload: { amount: 999 },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboxExpectationError);
    expect((error as Error).message).toMatch(
      /expected an outbox event of type "invoice.paid" with a matching payload; emitted: invoice.paid \([0-9a-f-]{36}\); of that type: [0-9a-f-]{36}: payload.amount differs/,
    );
    // Ids are random hex, which may hold the digits of the payload: the check reads around them.
    const withoutIds = (error as Error).message.replace(
      /[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}/g,
      '<id>',
    );
    expect(withoutIds).toContain('<id>');
    expect(withoutIds).not.toMatch(/secret-4242|999|100/);

    await expect(expectEmitted(dataSource, { type: 'invoice.refunded' })).rejects.toThrow(
      /type "invoice.refunded"; emitted: invoice.paid/,
    );
    await expect(expectNotEmitted(dataSource, { aggregateId: 'inv-7' })).rejects.toThrow(
      OutboxExpectationError,
    );
  });

  it('refuses to pick one of several matching events', async () => {
    await emit({ aggregateId: 'inv-1' });
    await emit({ aggregateId: 'inv-2' });
    await expect(expectEmitted(dataSource, { type: 'invoice.paid' })).rejects.toThrow(
      /expected one outbox event of type "invoice.paid" to match, 2 do/,
    );
    await expectEmitted(dataSource, { type: 'invoice.paid', aggregateId: 'inv-2' });
  });
});

describe('drainUntilIdle and makeDue', () => {
  it('delivers everything due, follow-up events included, and reports what it did', async () => {
    const id = await emit();
    const totals = await drainUntilIdle(t.app);
    expect(totals).toMatchObject({ claimed: 2, delivered: 2, failed: 0, dead: 0 });
    expect(calls.map((c) => c.handler).sort()).toEqual(['ledger', 'mailer', 'receipts']);
    const followUp = await expectEmitted(dataSource, {
      type: 'receipt.sent',
      payload: { invoice: 'inv-1' },
    });
    expect(followUp).toMatchObject({ causationId: id, deliveredTo: ['mailer'] });
  });

  it('leaves a retry to its backoff unless told to make retrying events due', async () => {
    failuresLeft.ledger = 1;
    const id = await emit();
    const first = await drainUntilIdle(t.app);
    expect(first).toMatchObject({ failed: 1 });
    expect((await expectEmitted(dataSource, { type: 'invoice.paid' })).dispatchedAt).toBeNull();

    const second = await drainUntilIdle(t.app, { makeRetryingDue: true });
    expect(second).toMatchObject({ claimed: 1, delivered: 1 });
    // Only the handler that failed ran again.
    expect(
      calls
        .filter((c) => c.id === id)
        .map((c) => c.handler)
        .sort(),
    ).toEqual(['ledger', 'ledger', 'receipts']);
  });

  it('makeDue brings one handler past its backoff; the next claim reruns it alone', async () => {
    failuresLeft.ledger = 1;
    const id = await emit();
    await drainUntilIdle(t.app);
    const ledgerRuns = () => calls.filter((c) => c.id === id && c.handler === 'ledger').length;
    expect(ledgerRuns()).toBe(1);
    expect(await t.app.get(OutboxEngine).drainOnce()).toMatchObject({ claimed: 0 });

    expect(await makeDue(t.app, { type: 'receipt.sent' })).toEqual([]);
    // A fresh event is already due: makeDue leaves it alone and does not report it.
    const fresh = await emit({ aggregateId: 'inv-fresh' });
    expect(await makeDue(t.app, { type: 'invoice.paid' })).toEqual([id]);
    await dataSource.query('DELETE FROM outbox_event WHERE id = $1', [fresh]);
    expect(await t.app.get(OutboxEngine).drainOnce()).toMatchObject({
      claimed: 1,
      delivered: 1,
    });
    expect(ledgerRuns()).toBe(2);
    expect(calls.filter((c) => c.id === id && c.handler === 'receipts')).toHaveLength(1);
  });

  it('runs a failing handler to its last attempt with makeRetryingDue, and stops there', async () => {
    failuresLeft.ledger = 10;
    await emit();
    const totals = await drainUntilIdle(t.app, { makeRetryingDue: true });
    expect(totals).toMatchObject({ dead: 1 });
    expect(calls.filter((c) => c.handler === 'ledger')).toHaveLength(3);
    expect((await expectEmitted(dataSource, { type: 'invoice.paid' })).deadAt).not.toBeNull();
  });

  it('refuses bounds it cannot work with, naming the option and the value', async () => {
    await expect(drainUntilIdle(t.app, { maxClaims: 0 })).rejects.toThrow(
      new InvalidOutboxTestingOptionError('drainUntilIdle', 'maxClaims', 0, 'an integer from 1'),
    );
    await expect(drainUntilIdle(t.app, { timeoutMs: Number.NaN })).rejects.toThrow(
      'drainUntilIdle: timeoutMs must be an integer from 1, got NaN',
    );
  });

  it('gives up with OutboxNotIdleError when handlers keep emitting', async () => {
    await emitCommitted(t.app, {
      type: 'echo',
      aggregateType: 'echo',
      aggregateId: 'e',
      payload: {},
    });
    const error = await drainUntilIdle(t.app, { maxClaims: 5 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OutboxNotIdleError);
    expect((error as OutboxNotIdleError).totals).toMatchObject({ claims: 5, claimed: 5 });
    expect((error as Error).message).toMatch(/not idle after 5 claims: 5 events claimed/);
  });
});
