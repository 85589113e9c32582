import type { OutboxRecord } from '../store/lease/lease.types';
import { LocalQueue, type QueuedEvent } from './local-queue';

const queued = (id: string, lane: string, startBy = 1000) =>
  ({
    record: { id } as OutboxRecord,
    handlers: [],
    lease: { sentAt: 0, deadline: 0 },
    startBy,
    lane,
  }) as QueuedEvent;

function takeAll(queue: LocalQueue, now = 0, ready?: (event: QueuedEvent) => boolean): string[] {
  const taken: string[] = [];
  for (let event = queue.take(now, () => undefined, ready); event;) {
    taken.push(event.record.id);
    event = queue.take(now, () => undefined, ready);
  }
  return taken;
}

describe('LocalQueue lanes', () => {
  afterEach(() => jest.useRealTimers());

  it('takes from the lanes in turn, each lane in claim order', () => {
    const queue = new LocalQueue(() => undefined);
    for (let i = 1; i <= 4; i++) queue.push(queued(`a${i}`, 'A'));
    queue.push(queued('b1', 'B'));
    queue.push(queued('c1', 'C'));
    queue.push(queued('b2', 'B'));
    expect(queue.length).toBe(7);
    expect(takeAll(queue)).toEqual(['a1', 'b1', 'c1', 'a2', 'b2', 'a3', 'a4']);
    expect(queue.length).toBe(0);
  });

  it('starts a lane that arrives behind a long one at the next take', () => {
    const queue = new LocalQueue(() => undefined);
    for (let i = 1; i <= 100; i++) queue.push(queued(`a${i}`, 'A'));
    expect(queue.take(0, () => undefined)?.record.id).toBe('a1');
    expect(queue.take(0, () => undefined)?.record.id).toBe('a2');
    queue.push(queued('b1', 'B'));
    const next = [0, 1, 2].map(() => queue.take(0, () => undefined)?.record.id);
    expect(next).toContain('b1');
    expect(next.indexOf('b1')).toBeLessThanOrEqual(1);
  });

  it('is one queue in claim order with a single lane', () => {
    const queue = new LocalQueue(() => undefined);
    for (const id of ['x', 'y', 'z']) queue.push(queued(id, ''));
    expect(takeAll(queue)).toEqual(['x', 'y', 'z']);
  });

  it('passes over a lane whose events are not ready, and hands on the expired ones', () => {
    const queue = new LocalQueue(() => undefined);
    queue.push(queued('a1', 'A'));
    queue.push(queued('b1', 'B', 5));
    queue.push(queued('b2', 'B'));
    queue.push(queued('c1', 'C'));
    const expired: string[] = [];
    const ready = (event: QueuedEvent) => event.record.id !== 'a1';
    const taken: string[] = [];
    for (let i = 0; i < 3; i++) {
      const event = queue.take(10, (late) => expired.push(late.record.id), ready);
      if (event) taken.push(event.record.id);
    }
    expect(taken).toEqual(['b2', 'c1']);
    expect(expired).toEqual(['b1']);
    expect(queue.length).toBe(1);
    expect(takeAll(queue, 10)).toEqual(['a1']);
  });

  it('expires the events past their time from every lane and drains the rest', () => {
    jest.useFakeTimers();
    const queue = new LocalQueue(() => undefined);
    queue.push(queued('a1', 'A', 5));
    queue.push(queued('a2', 'A', 50));
    queue.push(queued('b1', 'B', 6));
    queue.push(queued('c1', 'C', 50));
    expect(
      queue
        .expire(10)
        .map((e) => e.record.id)
        .sort(),
    ).toEqual(['a1', 'b1']);
    expect(queue.length).toBe(2);
    expect(
      queue
        .drain()
        .map((e) => e.record.id)
        .sort(),
    ).toEqual(['a2', 'c1']);
    expect(queue.length).toBe(0);
    expect(queue.take(0, () => undefined)).toBeUndefined();
  });
});
