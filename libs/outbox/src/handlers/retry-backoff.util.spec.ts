import { retryDelayMs } from './retry-backoff.util';

describe('retryDelayMs', () => {
  const settings = { baseMs: 1000, maxMs: 60_000, jitter: 0.5 };

  it('doubles from the base and stops at the cap', () => {
    const none = () => 0;
    expect([1, 2, 3, 4, 7, 8, 100].map((a) => retryDelayMs(a, settings, none))).toEqual([
      1000, 2000, 4000, 8000, 60_000, 60_000, 60_000,
    ]);
  });

  it('takes at most the jitter share off the delay', () => {
    expect(retryDelayMs(3, settings, () => 0.999999)).toBe(2000);
    expect(retryDelayMs(3, settings, () => 0.5)).toBe(3000);
    expect(retryDelayMs(3, { ...settings, jitter: 0 }, () => 0.9)).toBe(4000);
  });

  it('spreads retries of events that failed together', () => {
    const delays = new Set(Array.from({ length: 50 }, () => retryDelayMs(5, settings)));
    expect(delays.size).toBeGreaterThan(10);
    for (const d of delays) {
      expect(d).toBeGreaterThanOrEqual(8000);
      expect(d).toBeLessThanOrEqual(16_000);
    }
  });
});
