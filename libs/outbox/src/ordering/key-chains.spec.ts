import type { OutboxRecord } from '../store/lease/lease.types';
import { ALL, heldAfter, KeyChains, leftUndone } from './key-chains';
import { LocalQueue, type QueuedEvent } from '../engine/local-queue';

const record = (id: string, after: string | null, held: string[] = []) =>
  ({ id, after, held }) as unknown as OutboxRecord;

describe('KeyChains', () => {
  it('lets an event start once the one before it in its claim has settled, with what it left undone', async () => {
    const chains = new KeyChains();
    const [a, b, c] = [record('a', null), record('b', 'a'), record('c', 'b')];
    chains.expect([a, b, c]);
    expect([a, b, c].map((r) => chains.ready(r))).toEqual([true, false, false]);
    expect(chains.before(a)).toBeUndefined();
    const beforeB = chains.before(b)!;

    chains.end(a, new Set(['ledger']));
    await expect(beforeB).resolves.toEqual(new Set(['ledger']));
    expect(chains.ready(b)).toBe(true);
    expect(chains.ready(c)).toBe(false);
    // A given-back event blocks every ordered handler of the one after it.
    const beforeC = chains.before(c)!;
    chains.giveBack(b);
    await expect(beforeC).resolves.toBe(ALL);
  });

  it("waits for the event's new run when a later claim takes the one before it again", async () => {
    const chains = new KeyChains();
    const [p, x] = [record('p', null), record('x', 'p')];
    chains.expect([p, x]);
    chains.end(p, new Set(['journal']));
    // p was parked, woken and claimed again, now followed by y.
    const y = record('y', 'p');
    chains.expect([record('p', null), y]);
    expect(chains.ready(x)).toBe(true);
    expect(chains.ready(y)).toBe(false);
    await expect(chains.before(x)).resolves.toEqual(new Set(['journal']));
    expect(chains.ready(y)).toBe(false);
    const beforeY = chains.before(y)!;
    chains.end(p, new Set());
    await expect(beforeY).resolves.toEqual(new Set());
  });

  it('adds to `held` what the chain left undone, and carries it down the chain', () => {
    const r = record('x', 'w', ['audit']);
    expect(heldAfter(r, ['ledger', 'journal'], new Set(['ledger']))).toEqual(['audit', 'ledger']);
    expect(heldAfter(r, ['ledger', 'journal'], ALL)).toEqual(['audit', 'ledger', 'journal']);
    expect(heldAfter(r, ['journal'], new Set(['ledger']))).toBe(r.held);
    // An event that does not have the blocked handler still passes the block on.
    expect(leftUndone(['journal'], () => true, new Set(['ledger']))).toEqual(new Set(['ledger']));
    expect(leftUndone(['ledger'], (name) => name !== 'ledger', new Set())).toEqual(
      new Set(['ledger']),
    );
    expect(leftUndone(['ledger'], () => true, ALL)).toBe(ALL);
  });
});

describe('LocalQueue.take', () => {
  it('skips events that are not ready, keeping their order, and hands on those past their time', () => {
    const queue = new LocalQueue(() => undefined);
    const at = (id: string, startBy: number) =>
      ({ record: record(id, null), lease: {}, startBy }) as unknown as QueuedEvent;
    for (const event of [at('a', 100), at('b', 5), at('c', 100), at('d', 100)]) queue.push(event);
    const expired: string[] = [];
    const ready = (event: QueuedEvent) => event.record.id !== 'a';
    const take = () =>
      queue.take(
        10,
        (event) => expired.push(event.record.id),
        (event) => ready(event),
      )?.record.id;
    expect(take()).toBe('c');
    expect(expired).toEqual(['b']);
    expect(take()).toBe('d');
    expect(take()).toBeUndefined();
    expect(queue.length).toBe(1);
    expect(queue.take(10, () => undefined)?.record.id).toBe('a');
    expect(queue.length).toBe(0);
  });
});
