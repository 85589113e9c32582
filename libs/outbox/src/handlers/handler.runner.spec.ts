import type { DataSource } from 'typeorm';
import { EventDispatcher } from './event.dispatcher';
import { HandlerRunner } from './handler.runner';
import type { HandlerTransactions } from './handler.transactions';
import type { OutboxHandlerRegistration } from './event.dispatcher';
import type { OutboxEvent } from '../outbox-event.types';
import { InvalidOutboxHandlerTransactionError } from '../outbox.errors';

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

/** Registers `handlers` and runs every one of them on `event` through `runner`. */
function runAll(
  options: ConstructorParameters<typeof EventDispatcher>[0],
  handlers: Omit<OutboxHandlerRegistration, 'location'>[],
  runner = new HandlerRunner(),
) {
  const registry = new EventDispatcher(options, {} as DataSource);
  for (const h of handlers) registry.register({ ...h, location: `T.${h.name}` });
  return runner.start(event, registry.handlersOf(event.type), { attempt: 1 }).outcomes;
}

describe('HandlerRunner', () => {
  it('runs a handler whose name is also an Object.prototype property', async () => {
    const ran: string[] = [];
    const outcomes = await runAll(
      { handlerTimeoutMs: 1000 },
      ['constructor', 'to-string'].map((name) => ({
        name,
        events: '*' as const,
        handle: () => void ran.push(name),
      })),
    );
    expect(outcomes.map((o) => [o.handlerName, o.ok]).sort()).toEqual([
      ['constructor', true],
      ['to-string', true],
    ]);
    expect(ran.sort()).toEqual(['constructor', 'to-string']);
  });

  it('races a handler against its own budget; a handler without one keeps the module budget', async () => {
    const never = new Promise<void>(() => undefined);
    let signal: AbortSignal | undefined;
    // Ends after 60 ms, within the module budget: by then the 20 ms budget has aborted the other.
    let abortedWhenModuleBudgetEnded: boolean | undefined;
    const outcomes = await runAll({ handlerTimeoutMs: 10_000, leaseMs: 60_000 }, [
      {
        name: 'quick-budget',
        events: '*',
        timeoutMs: 20,
        handle: (_event, ctx) => {
          signal = ctx.signal;
          return never;
        },
      },
      {
        name: 'module-budget',
        events: '*',
        handle: async () => {
          await new Promise((resolve) => setTimeout(resolve, 60));
          abortedWhenModuleBudgetEnded = signal?.aborted;
        },
      },
    ]);
    const byName = Object.fromEntries(outcomes.map((o) => [o.handlerName, o]));
    expect(byName['quick-budget']).toMatchObject({ ok: false, timedOut: true });
    expect(String((byName['quick-budget'] as { error: unknown }).error)).toContain(
      'did not finish within its 20 ms budget',
    );
    expect(abortedWhenModuleBudgetEnded).toBe(true);
    expect(byName['module-budget']).toEqual({ handlerName: 'module-budget', ok: true });
  });

  it('counts a transactional handler whose transaction committed as its budget ran out as delivered', async () => {
    let aborted = false;
    // The transactions' contract: the transaction settles soon after the abort, here by committing.
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
    const outcomes = await runAll(
      { handlerTimeoutMs: 10 },
      [{ name: 'late-commit', events: '*', transaction: true, handle: () => undefined }],
      new HandlerRunner(transactions),
    );
    expect(aborted).toBe(true);
    expect(outcomes).toEqual([{ handlerName: 'late-commit', ok: true }]);
  });

  it('never runs a transactional handler outside a transaction: a runner without them reports it failed', async () => {
    let ran = false;
    const outcomes = await runAll({ handlerTimeoutMs: 1000 }, [
      { name: 'ledger', events: '*', transaction: true, handle: () => void (ran = true) },
    ]);
    expect(ran).toBe(false);
    expect(outcomes).toEqual([
      {
        handlerName: 'ledger',
        ok: false,
        timedOut: false,
        error: expect.any(InvalidOutboxHandlerTransactionError),
      },
    ]);
  });
});

describe('EventDispatcher.deliver (deprecated)', () => {
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
