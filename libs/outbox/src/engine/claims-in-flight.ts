import { performance } from 'node:perf_hooks';
/**
 * Claims in flight at once while claims come back full (a backlog): a slot that frees while a
 * claim is out need not wait for that claim and then its own, and slots freed meanwhile still
 * gather into the next one.
 */
const MAX_CLAIMS_IN_FLIGHT = 2;

/**
 * How long after a claim that brought some events, but fewer than it asked for, the next claim
 * waits for more to arrive: GATHER_PER_EVENT_MS for each event it brought, in whole
 * milliseconds, at most CLAIM_GATHER_MAX_MS. Producers committing one event at a time wake the
 * engine once per commit; claiming on each wake would spend a transaction of the database's (the
 * producers' own database) on every event or two. The wait follows the stream: a trickle (claims
 * of an event or two) waits a millisecond, a storm (claims of ten or more) the most, holding its
 * events a few milliseconds for about a third fewer claims and settles. An idle engine, whose
 * last claim is older than its wait, claims at once.
 */
export const GATHER_PER_EVENT_MS = 0.5;
export const CLAIM_GATHER_MAX_MS = 5;

/** The pause after a first failed claim; it doubles while claims keep failing. */
const RETRY_FIRST_MS = 100;

/**
 * The producer's loop claims sent and not answered yet (its hand-driven ones are not here), with
 * when each was sent (liveness reads how long the oldest has been out), and when the next may
 * go: one at a time unless the last came back full; under a stream of wakes, gathered.
 */
export class ClaimsInFlight {
  /** Each claim and the `performance.now()` it was sent at, oldest first (a Map keeps that order). */
  private readonly out = new Map<Promise<void>, number>();
  private full = false;
  /** Claims failed in a row. */
  private failedInARow = 0;
  private gatherUntil = 0;
  private gathering: NodeJS.Timeout | undefined;

  constructor(private readonly now: () => number = () => performance.now()) {}

  /**
   * Whether a claim may be sent now. One that must wait for a claim out calls nothing (that
   * claim's answer looks again); one that waits out the gathering has `then` called at its end.
   */
  mayClaim(then: () => void): boolean {
    if (this.out.size >= (this.full ? MAX_CLAIMS_IN_FLIGHT : 1)) return false;
    const wait = this.full ? 0 : this.gatherUntil - this.now();
    if (wait <= 0) return true;
    this.gathering ??= setTimeout(() => {
      this.gathering = undefined;
      then();
    }, wait);
    return false;
  }

  /**
   * A claim that asked for `limit` events came back with `brought`. True when claims had failed
   * before it: the database answers again.
   */
  answered(brought: number, limit: number): boolean {
    const again = this.failedInARow > 0;
    this.failedInARow = 0;
    this.full = brought >= limit;
    const busy = brought > 0 && !this.full;
    this.gatherUntil = busy
      ? this.now() + Math.min(CLAIM_GATHER_MAX_MS, Math.ceil(brought * GATHER_PER_EVENT_MS))
      : 0;
    return again;
  }

  /** A claim failed: what comes next is neither a backlog nor gathered. */
  failed(): void {
    this.full = false;
    this.gatherUntil = 0;
    this.failedInARow++;
  }

  /**
   * How long to pause after the claims that failed in a row: 100 ms after the first (a
   * terminated backend, a failover's first error: the next claim gets a new connection),
   * doubling while they keep failing, up to `maxMs`.
   */
  retryPauseMs(maxMs: number): number {
    return Math.min(maxMs, RETRY_FIRST_MS * 2 ** Math.min(Math.max(0, this.failedInARow - 1), 20));
  }

  /** The last claim answered came back full: more is due than it took (a backlog). */
  get backlog(): boolean {
    return this.full;
  }

  /** No gathering planned (the loop stopped). */
  stop(): void {
    clearTimeout(this.gathering);
    this.gathering = undefined;
  }

  /** When the oldest claim still out was sent (`performance.now()`), or null when none is. */
  get oldestSentAt(): number | null {
    for (const sentAt of this.out.values()) return sentAt;
    return null;
  }

  /** A claim just sent. */
  add(claim: Promise<void>): void {
    this.out.set(claim, this.now());
  }

  delete(claim: Promise<void>): void {
    this.out.delete(claim);
  }

  /** Resolves once every claim sent so far has come back (and its rows were handed on). */
  async settled(): Promise<void> {
    while (this.out.size > 0) await Promise.all(this.out.keys());
  }
}
