import type { OutboxRecord } from '../store/lease/lease.types';

/**
 * Longest time between two claims that look for due dead rows (replays) while claims keep
 * coming back full of live rows.
 */
export const DEAD_LOOK_INTERVAL_MS = 1000;

/**
 * Whether the producer's next claim looks for due dead rows too. Due dead rows are few and rare,
 * and a claim of live rows alone costs the server about half as much (see `CLAIM_LIVE`), so a
 * claim looks for them only when some may be due: at start, after a wake that names no time
 * (the poll, a reconnect), a planned wake (the probe of the next due time covers dead rows), a
 * failed claim, a claim whose dead rows filled their share, and at least every
 * DEAD_LOOK_INTERVAL_MS. A replay made due by an operator or a peer's give-back is found by the
 * planned wake that follows the next short claim, or by the interval.
 */
export class DeadLook {
  private mayBeDue = true;
  private lastLook = -Infinity;

  /** Due dead rows may be waiting: the next claim looks for them. */
  maybeDue(): void {
    this.mayBeDue = true;
  }

  /** Whether a claim sent at `now` looks for dead rows; `force` for a claim that always does. */
  send(now: number, force = false): boolean {
    if (!force && !this.mayBeDue && now - this.lastLook < DEAD_LOOK_INTERVAL_MS) return false;
    // Set again by whatever may make dead rows due while this claim is out.
    this.mayBeDue = false;
    this.lastLook = now;
    return true;
  }

  /**
   * A claim that looked for dead rows came back with `records` for `limit`: unless it came back
   * short or its dead rows did not fill their share (half the limit, rounded down), more may be
   * due.
   */
  answered(records: readonly OutboxRecord[], limit: number): void {
    if (records.length < limit) return;
    let dead = 0;
    for (const record of records) if (record.deadAt !== null) dead++;
    if (dead >= Math.floor(limit / 2)) this.mayBeDue = true;
  }
}
