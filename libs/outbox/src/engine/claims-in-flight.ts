import { performance } from 'node:perf_hooks';
/**
 * Claims in flight at once. A slot that frees while a claim is out need not wait for that claim
 * and then its own: under load a second claim takes it at once, and slots freed meanwhile still
 * gather into the next one.
 */
const MAX_CLAIMS_IN_FLIGHT = 2;

/**
 * The producer's loop claims sent and not answered yet (its hand-driven ones are not here), with
 * when each was sent: liveness reads how long the oldest has been out.
 */
export class ClaimsInFlight {
  /** Each claim and the `performance.now()` it was sent at, oldest first (a Map keeps that order). */
  private readonly out = new Map<Promise<void>, number>();

  /** As many claims are out as may be at once. */
  get full(): boolean {
    return this.out.size >= MAX_CLAIMS_IN_FLIGHT;
  }

  /** When the oldest claim still out was sent (`performance.now()`), or null when none is. */
  get oldestSentAt(): number | null {
    for (const sentAt of this.out.values()) return sentAt;
    return null;
  }

  /** A claim just sent. */
  add(claim: Promise<void>): void {
    this.out.set(claim, performance.now());
  }

  delete(claim: Promise<void>): void {
    this.out.delete(claim);
  }

  /** Resolves once every claim sent so far has come back (and its rows were handed on). */
  async settled(): Promise<void> {
    while (this.out.size > 0) await Promise.all(this.out.keys());
  }
}
