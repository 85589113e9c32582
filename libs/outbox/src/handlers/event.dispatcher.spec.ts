import { EventDispatcher } from './event.dispatcher';
import {
  InvalidOutboxHandlerTimeoutError,
  InvalidOutboxHandlerTransactionError,
} from '../outbox.errors';
import type { DataSource } from 'typeorm';

describe("EventDispatcher.register: a handler's own timeoutMs and transaction", () => {
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
      const dispatcher = new EventDispatcher({ handlerTimeoutMs: 1000 }, {} as DataSource);
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
