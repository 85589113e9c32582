import { QUEUE_WORK_MS, QueueDepth } from './queue-depth';

describe('QueueDepth', () => {
  it('is two events a slot until an event has run', () => {
    expect(new QueueDepth(500, 20).cap).toBe(40);
    expect(new QueueDepth(10, 20).cap).toBe(10);
  });

  it('takes the pace the slots allow from the first events, before any backlog', () => {
    const depth = new QueueDepth(500, 20);
    // 20 ms handlers on 20 slots: one event a millisecond.
    for (let i = 0; i < 10; i++) depth.held(20);
    expect(depth.cap).toBe(QUEUE_WORK_MS);
  });

  it('takes the pace of starts under a backlog over the slots’ (fast handlers that the process, not the slots, bounds)', () => {
    const depth = new QueueDepth(500, 20);
    for (let i = 0; i < 10; i++) depth.held(0.01);
    expect(depth.cap).toBe(500);
    // 100 starts every 10 ms: 10 events a millisecond.
    for (let at = 0; at <= 1_000; at += 10) depth.started(100, at);
    expect(depth.cap).toBe(10 * QUEUE_WORK_MS);
  });

  it('holds none once events waited out their TTL, and doubles each time the queue runs dry', () => {
    const depth = new QueueDepth(500, 20);
    for (let i = 0; i < 10; i++) depth.held(0.01);
    expect(depth.cap).toBe(500);
    depth.expired();
    expect(depth.cap).toBe(0);
    depth.ranDry();
    depth.ranDry();
    depth.ranDry();
    expect(depth.cap).toBe(4);
    for (let i = 0; i < 10; i++) depth.ranDry();
    expect(depth.cap).toBe(500);
  });

  it('does not count the time the queue stood empty as a gap between starts', () => {
    const depth = new QueueDepth(500, 20);
    for (let at = 0; at <= 200; at++) depth.started(1, at);
    depth.emptied();
    depth.started(1, 10_000);
    depth.started(1, 10_001);
    expect(depth.cap).toBe(QUEUE_WORK_MS);
  });

  it('follows a change of pace within a few dozen starts', () => {
    const depth = new QueueDepth(500, 20);
    for (let at = 0; at <= 200; at++) depth.started(1, at);
    // Handlers ten times slower: one start every 10 ms.
    for (let at = 210; at <= 2_000; at += 10) depth.started(1, at);
    expect(depth.cap).toBeLessThanOrEqual(Math.ceil(QUEUE_WORK_MS / 9));
    expect(depth.cap).toBeGreaterThanOrEqual(1);
  });
});
