import { EventDispatcher } from './event.dispatcher';
import {
  InvalidOutboxHandlerTimeoutError,
  InvalidOutboxHandlerTransactionError,
} from '../outbox.errors';
import type { HandlerTransactions } from './handler.transactions';
import type { OutboxEvent } from '../outbox-event.types';

const event: OutboxEvent = {
  id: '01a22700-0000-7000-8000-000000000000',
  type: 'thing.happened',
  aggregateType: 'thing',
  aggregateId: 't-1',
  organizationId: null,
  requestId: null,
  payload: {},
  metadata: {},
  occurredAt: new Date(0),
  causationId: null,
  correlationId: null,
  orderingKey: 'thing:t-1',
};

describe('EventDispatcher.deliver', () => {
  it('runs a handler whose name is also an Object.prototype property', async () => {
    const dispatcher = new EventDispatcher({ handlerTimeoutMs: 1000 });
    const ran: string[] = [];
    for (const name of ['constructor', 'to-string']) {
      dispatcher.register({
        name,
        events: '*',
        handle: () => void ran.push(name),
        location: `T.${name}`,
      });
    }
    const outcomes = await dispatcher.deliver(event, {}, { attempt: 1 });
    expect(outcomes.map((o) => [o.handlerName, o.ok]).sort()).toEqual([
      ['constructor', true],
      ['to-string', true],
    ]);
    expect(ran.sort()).toEqual(['constructor', 'to-string']);
  });

  it('skips only the handlers already in deliveries', async () => {
    const dispatcher = new EventDispatcher({ handlerTimeoutMs: 1000 });
    const ran: string[] = [];
    for (const name of ['audit-log', 'webhook-fanout']) {
      dispatcher.register({
        name,
        events: ['thing.happened'],
        handle: () => void ran.push(name),
        location: name,
      });
    }
    await dispatcher.deliver(event, { 'audit-log': '2026-01-01T00:00:00Z' }, { attempt: 2 });
    expect(ran).toEqual(['webhook-fanout']);
  });
});

describe('EventDispatcher: a handler with its own timeoutMs', () => {
  it('is raced against its own budget; a handler without one keeps the module budget', async () => {
    const dispatcher = new EventDispatcher({ handlerTimeoutMs: 10_000, leaseMs: 60_000 });
    const never = new Promise<void>(() => undefined);
    let signal: AbortSignal | undefined;
    dispatcher.register({
      name: 'quick-budget',
      events: '*',
      timeoutMs: 20,
      handle: (_event, ctx) => {
        signal = ctx.signal;
        return never;
      },
      location: 'T.quick',
    });
    // Ends after 60 ms, within the module budget: by then the 20 ms budget has aborted the other.
    let abortedWhenModuleBudgetEnded: boolean | undefined;
    dispatcher.register({
      name: 'module-budget',
      events: '*',
      handle: async () => {
        await new Promise((resolve) => setTimeout(resolve, 60));
        abortedWhenModuleBudgetEnded = signal?.aborted;
      },
      location: 'T.module',
    });
    const outcomes = await dispatcher.deliver(event, {}, { attempt: 1 });
    const byName = Object.fromEntries(outcomes.map((o) => [o.handlerName, o]));
    expect(byName['quick-budget']).toMatchObject({ ok: false, timedOut: true });
    expect(String((byName['quick-budget'] as { error: unknown }).error)).toContain(
      'did not finish within its 20 ms budget',
    );
    expect(abortedWhenModuleBudgetEnded).toBe(true);
    expect(byName['module-budget']).toEqual({ handlerName: 'module-budget', ok: true });
  });

  it.each([0, -5, 1.5, '500', 59_001])('refuses timeoutMs %p with a typed error', (timeoutMs) => {
    const dispatcher = new EventDispatcher({ handlerTimeoutMs: 1000, leaseMs: 60_000 });
    expect(() =>
      dispatcher.register({
        name: 'bad-budget',
        events: '*',
        timeoutMs: timeoutMs as number,
        handle: () => undefined,
        location: 'T.bad',
      }),
    ).toThrow(InvalidOutboxHandlerTimeoutError);
  });

  it.each(['yes', 1, null, [], { isolationLevel: 'READ UNCOMMITTED' }])(
    'refuses transaction %p with a typed error naming the value',
    (transaction) => {
      const transactions = {} as HandlerTransactions;
      const dispatcher = new EventDispatcher({ handlerTimeoutMs: 1000 }, transactions);
      const register = () =>
        dispatcher.register({
          name: 'bad-transaction',
          events: '*',
          transaction: transaction as never,
          handle: () => undefined,
          location: 'T.bad',
        });
      expect(register).toThrow(InvalidOutboxHandlerTransactionError);
      expect(register).toThrow(`transaction ${JSON.stringify(transaction)}`);
    },
  );

  it('refuses a transactional handler on a dispatcher built without OutboxModule', () => {
    const dispatcher = new EventDispatcher({ handlerTimeoutMs: 1000 });
    expect(() =>
      dispatcher.register({
        name: 'orphan',
        events: '*',
        transaction: true,
        handle: () => undefined,
        location: 'T.orphan',
      }),
    ).toThrow(/no DataSource to open its transactions on/);
  });

  it('counts a transactional handler whose transaction committed as its budget ran out as delivered', async () => {
    let aborted = false;
    // The runner's contract: the transaction settles soon after the abort, here by committing.
    const transactions = {
      run: (request: { signal: AbortSignal }) => {
        const committed = new Promise<void>((resolve) =>
          request.signal.addEventListener('abort', () => {
            aborted = true;
            setTimeout(resolve, 5);
          }),
        );
        return { committed, ended: committed };
      },
    } as unknown as HandlerTransactions;
    const dispatcher = new EventDispatcher({ handlerTimeoutMs: 10 }, transactions);
    dispatcher.register({
      name: 'late-commit',
      events: '*',
      transaction: true,
      handle: () => undefined,
      location: 'T.late',
    });
    const outcomes = await dispatcher.deliver(event, {}, { attempt: 1 });
    expect(aborted).toBe(true);
    expect(outcomes).toEqual([{ handlerName: 'late-commit', ok: true }]);
  });
});

describe('EventDispatcher: ordered handlers', () => {
  it("keeps each handler's ordering, the module's handlers option over the decorator's", () => {
    const dispatcher = new EventDispatcher({
      handlerTimeoutMs: 1000,
      handlers: { ledger: { ordered: { onDead: 'skip' } } },
    });
    const handle = () => undefined;
    dispatcher.register({
      name: 'ledger',
      events: ['thing.happened'],
      ordered: true,
      handle,
      location: 'L',
    });
    dispatcher.register({ name: 'audit', events: '*', ordered: true, handle, location: 'A' });
    dispatcher.register({ name: 'mailer', events: ['thing.happened'], handle, location: 'M' });

    const ordering = Object.fromEntries(
      dispatcher.policies('thing.happened').map((h) => [h.name, h.policy.ordered]),
    );
    expect(ordering).toEqual({
      ledger: { onDead: 'skip' },
      audit: { onDead: 'block' },
      mailer: null,
    });
  });
});
