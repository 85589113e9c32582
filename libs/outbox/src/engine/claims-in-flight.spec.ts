import { fakeClock } from '../common/fake-clock.spec-support';
import { CLAIM_GATHER_MAX_MS, GATHER_PER_EVENT_MS, ClaimsInFlight } from './claims-in-flight';

describe('ClaimsInFlight', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  const { now, advance } = fakeClock();
  const inFlight = () => new ClaimsInFlight(now);

  const never = new Promise<void>(() => undefined);

  it('lets one claim out at a time while claims come back short', () => {
    const claims = inFlight();
    const later = jest.fn();
    expect(claims.mayClaim(later)).toBe(true);
    claims.add(never);
    expect(claims.mayClaim(later)).toBe(false);
    advance(10 * CLAIM_GATHER_MAX_MS);
    // The claim out answers the wake: nothing is planned for it.
    expect(later).not.toHaveBeenCalled();
  });

  it('lets a second claim out while the last came back full', () => {
    const claims = inFlight();
    claims.answered(10, 10);
    claims.add(never);
    expect(claims.mayClaim(jest.fn())).toBe(true);
    claims.add(Promise.resolve());
    expect(claims.mayClaim(jest.fn())).toBe(false);
  });

  it.each([
    [1, 1],
    [4, 4 * GATHER_PER_EVENT_MS],
    [99, CLAIM_GATHER_MAX_MS],
  ])(
    'after a short claim that brought %i events, waits %i ms for more, then looks again',
    (brought, waitMs) => {
      const claims = inFlight();
      const first = Promise.resolve();
      claims.add(first);
      claims.answered(brought, 100);
      claims.delete(first);
      const later = jest.fn();
      expect(claims.mayClaim(later)).toBe(false);
      expect(claims.mayClaim(later)).toBe(false);
      advance(waitMs - 1);
      expect(later).not.toHaveBeenCalled();
      advance(1);
      // One look for however many wakes came while it gathered.
      expect(later).toHaveBeenCalledTimes(1);
      expect(claims.mayClaim(later)).toBe(true);
    },
  );

  it.each([
    ['an empty claim', (c: ClaimsInFlight) => c.answered(0, 100)],
    ['a full claim', (c: ClaimsInFlight) => c.answered(100, 100)],
    ['a failed claim', (c: ClaimsInFlight) => c.failed()],
  ])('claims at once after %s, even one answered while gathering', (_, answer) => {
    const claims = inFlight();
    claims.answered(3, 100);
    answer(claims);
    expect(claims.mayClaim(jest.fn())).toBe(true);
  });

  it('plans nothing once stopped', () => {
    const claims = inFlight();
    claims.answered(3, 100);
    const later = jest.fn();
    expect(claims.mayClaim(later)).toBe(false);
    claims.stop();
    advance(10 * CLAIM_GATHER_MAX_MS);
    expect(later).not.toHaveBeenCalled();
  });

  it('says when a claim answers after failed ones, and pauses 100 ms after a first failure, doubling up to the most', () => {
    const claims = inFlight();
    expect(claims.answered(1, 10)).toBe(false);
    const pauses: number[] = [];
    for (let i = 0; i < 6; i++) {
      claims.failed();
      pauses.push(claims.retryPauseMs(1000));
    }
    expect(pauses).toEqual([100, 200, 400, 800, 1000, 1000]);
    expect(claims.answered(0, 10)).toBe(true);
    expect(claims.answered(0, 10)).toBe(false);
    claims.failed();
    expect(claims.retryPauseMs(1000)).toBe(100);
  });
});
