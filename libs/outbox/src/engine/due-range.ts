import type { OutboxRecord } from '../store/lease/lease.types';

/** One claim on its way: the bound it was sent with, and how far its answer may raise it. */
export interface DueRangeTicket {
  readonly from: number | null;
  /** Lowered by every wake that arrives while the claim is out. */
  cap: number;
}

/**
 * Where the producer's next claim starts in the due range of live rows (epoch ms, database
 * clock; null: from the start of the index).
 *
 * Every claim and every settle moves rows out of the front of the due range, and each leaves an
 * index entry behind that only VACUUM removes. While a long transaction holds the xmin horizon (a
 * backup, a report), VACUUM cannot remove them, and a claim scanning from the start would walk
 * every entry left since the horizon was taken. So each claim starts where the previous one left
 * the head of the range:
 *
 * - a claim that came back short took every due row it could see up to its own `now()`: the
 *   head moves to that time;
 * - a full claim took the first rows in due order: the head moves to the last of them.
 *
 * Rows can still become due behind the head: a transaction that committed after a claim but
 * whose `now()` came before it (an emit in a long transaction), a release, a replay. Each of
 * those sends a NOTIFY whose payload is its `now()`, and `lower` moves the bound back to it; the
 * engine's own retries lower it to their due time. A claim in flight when a wake arrives cannot
 * raise the bound past the wake's time (it may not have seen those rows). What no wake names (a
 * wake without a time, the poll, a reconnect after missed notifications, a failed claim, another
 * instance's claim rolled back) resets the bound: the next claim scans the whole range.
 */
export class DueRange {
  private from: number | null = null;
  private readonly out = new Set<DueRangeTicket>();

  /** The bound for a claim sent now; hand the ticket back with `answered` or `failed`. */
  send(): DueRangeTicket {
    const ticket = { from: this.from, cap: Infinity };
    this.out.add(ticket);
    return ticket;
  }

  /** The bound a probe of the next due time should start at. */
  get lowerBound(): number | null {
    return this.from;
  }

  /**
   * A claim came back: `head` is where it left the range (see above), or null when it learned
   * nothing (no live row, or an empty answer).
   */
  answered(ticket: DueRangeTicket, head: number | null): void {
    this.out.delete(ticket);
    if (head === null) return;
    const raised = Math.min(head, ticket.cap);
    // -Infinity: the bound was reset while the claim was out; a claim sent after it moves it.
    if (raised === -Infinity) return;
    this.from = this.from === null ? raised : Math.max(this.from, raised);
  }

  /** A claim failed: nothing is known of what it did or did not take. */
  failed(ticket: DueRangeTicket): void {
    this.out.delete(ticket);
    this.reset();
  }

  /** Rows became due from `at` (a wake's payload, a retry): claim from there at the latest. */
  lower(at: number): void {
    if (this.from !== null && at < this.from) this.from = at;
    for (const ticket of this.out) ticket.cap = Math.min(ticket.cap, at);
  }

  /** Rows may have become due anywhere: the next claim scans the whole range. */
  reset(): void {
    this.from = null;
    for (const ticket of this.out) ticket.cap = -Infinity;
  }
}

/**
 * Where a claim of `limit` rows left the head of the live due range (epoch ms, database clock):
 * at its own `now()` when it came back short (it took every due row it could see), at the last
 * live row it took when it came back full; null when it took no live row. A full fair claim took
 * its partitions' shares from anywhere in the range, and then the first due rows left (its
 * fill): the head is at the last row of the fill, or unknown (null) when the shares took it all.
 */
export function headAfter(records: readonly OutboxRecord[], limit: number): number | null {
  const live = records.filter((record) => record.deadAt === null);
  if (live.length === 0) return null;
  if (records.length < limit) return live[0].claimedAt.getTime();
  if (live[0].fromFill === undefined) return live[live.length - 1].dueAt.getTime();
  let head: number | null = null;
  for (const record of live) {
    if (record.fromFill) head = Math.max(head ?? -Infinity, record.dueAt.getTime());
  }
  return head;
}
