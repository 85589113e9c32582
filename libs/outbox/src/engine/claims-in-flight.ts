/**
 * Claims in flight at once. A slot that frees while a claim is out need not wait for that claim
 * and then its own: under load a second claim takes it at once, and slots freed meanwhile still
 * gather into the next one.
 */
const MAX_CLAIMS_IN_FLIGHT = 2;

/** The producer's loop claims sent and not answered yet (its hand-driven ones are not here). */
export class ClaimsInFlight {
  private readonly out = new Set<Promise<void>>();

  /** As many claims are out as may be at once. */
  get full(): boolean {
    return this.out.size >= MAX_CLAIMS_IN_FLIGHT;
  }

  add(claim: Promise<void>): void {
    this.out.add(claim);
  }

  delete(claim: Promise<void>): void {
    this.out.delete(claim);
  }

  /** Resolves once every claim sent so far has come back (and its rows were handed on). */
  async settled(): Promise<void> {
    while (this.out.size > 0) await Promise.all(this.out);
  }
}
