import type { OutboxLeaseStore } from '../store/lease/lease.store';
import type { DeliveredSettle, OutboxRecord } from '../store/lease/lease.types';
import { ok } from '../store/outbox.result';
import { OutboxCompleter } from './outbox.completer';
import type { Settle } from './settle-statements';

/**
 * The completer's batching, on a store that records what each statement carried (what the
 * statements write is the lease specs' concern, on a real database).
 */
describe('OutboxCompleter, settles that ride together', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  function completer(batchSize = 250) {
    const statements: string[][] = [];
    const store = {
      markDelivered: (settles: readonly DeliveredSettle[]) => {
        statements.push(settles.map((s) => s.id));
        return Promise.resolve(ok({ settled: settles.map((s) => s.id), stale: [] }));
      },
    } as unknown as OutboxLeaseStore;
    return { statements, completer: new OutboxCompleter(store, { deadRetryMs: 1000, batchSize }) };
  }

  const delivered = (id: string, sequenced = false): Settle => ({
    kind: 'delivered',
    record: { id, attempts: 1, sequenced, deadAt: null } as unknown as OutboxRecord,
    settle: { id, attempts: 1, handlers: ['billing'] },
  });

  /** Moves the clock by `ms` and lets the statements it sent come back. */
  async function advance(ms: number) {
    await jest.advanceTimersByTimeAsync(ms);
  }

  it("sends every settle queued by the time the first has gathered, not only the first's own", async () => {
    const { statements, completer: c } = completer();
    const first = c.complete(delivered('a'), Date.now() + 60_000);
    await advance(4);
    const second = c.complete(delivered('b'), Date.now() + 60_000);
    await advance(4);
    const third = c.complete(delivered('c'), Date.now() + 60_000);
    expect(statements).toEqual([]);
    await advance(2);
    // The first settle has waited its 10 ms: the two queued after it travel with it.
    expect(statements).toEqual([['a', 'b', 'c']]);
    await expect(Promise.all([first, second, third])).resolves.toEqual([
      'settled',
      'settled',
      'settled',
    ]);
  });

  it('sends the settle of an event placed for ordered handlers after 5 ms: its key waits on it', async () => {
    const { statements, completer: c } = completer();
    void c.complete(delivered('a'), Date.now() + 60_000);
    void c.complete(delivered('ordered', true), Date.now() + 60_000);
    await advance(4);
    expect(statements).toEqual([]);
    await advance(1);
    expect(statements).toEqual([['a', 'ordered']]);
  });

  it('sends a full batch at once, and what follows it after its own wait', async () => {
    const { statements, completer: c } = completer(2);
    void c.complete(delivered('a'), Date.now() + 60_000);
    void c.complete(delivered('b'), Date.now() + 60_000);
    void c.complete(delivered('c'), Date.now() + 60_000);
    await advance(0);
    expect(statements).toEqual([['a', 'b']]);
    await advance(10);
    expect(statements).toEqual([['a', 'b'], ['c']]);
  });
});
