/** What `drainUntilIdle` did, summed over its claims. */
export interface DrainTotals {
  /** Claims made, the last of which found nothing due. */
  claims: number;
  claimed: number;
  delivered: number;
  failed: number;
  dead: number;
}
