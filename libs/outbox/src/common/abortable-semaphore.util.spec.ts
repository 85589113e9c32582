import { AbortableSemaphore } from './abortable-semaphore.util';

describe('AbortableSemaphore', () => {
  it('grants at most its size at once, then the waiters in order as slots are released', async () => {
    const slots = new AbortableSemaphore(2);
    const never = new AbortController().signal;
    const first = await slots.acquire(never);
    const second = await slots.acquire(never);
    const order: string[] = [];
    const third = slots.acquire(never).then((release) => (order.push('third'), release));
    const fourth = slots.acquire(never).then((release) => (order.push('fourth'), release));
    await new Promise((resolve) => setImmediate(resolve));
    expect(order).toEqual([]);

    first();
    first(); // a second release of the same grant frees nothing more
    const releaseThird = await third;
    await new Promise((resolve) => setImmediate(resolve));
    expect(order).toEqual(['third']);
    second();
    (await fourth)();
    releaseThird();
    expect(order).toEqual(['third', 'fourth']);
  });

  it('gives up waiting when the signal aborts, and leaves the slot to the next waiter', async () => {
    const slots = new AbortableSemaphore(1);
    const held = await slots.acquire(new AbortController().signal);
    const budget = new AbortController();
    const waiting = slots.acquire(budget.signal);
    const next = slots.acquire(new AbortController().signal);
    budget.abort(new Error('budget spent'));
    await expect(waiting).rejects.toThrow('budget spent');
    held();
    await expect(next).resolves.toEqual(expect.any(Function));
    await expect(slots.acquire(AbortSignal.abort(new Error('late')))).rejects.toThrow('late');
  });
});
