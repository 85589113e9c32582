/** What `drainUntilIdle` did, summed over its claims. */
export interface DrainTotals {
  /** Claims made, the last of which found nothing due. */
  claims: number;
  claimed: number;
  delivered: number;
  failed: number;
  dead: number;
  /** Events held back by a handler's limit: due again when it has room, not in this drain. */
  held: number;
}
