import type { DeliveredSettle, FailedSettle } from '../store/lease/lease.types';
import type { Settle } from './settle-statements';

/** Settles remembered at most, the newest kept: enough for seconds of a busy instance. */
const REMEMBERED = 10_000;

/** Settles that can be written again without harm (see `WrittenSettles`). */
export interface WrittenAgain {
  delivered: DeliveredSettle[];
  failed: FailedSettle[];
}

/**
 * The delivered and failed settles this instance wrote lately, to write again after the
 * database failed and answered again. A server that acknowledged a settle may lose it in a
 * failover (asynchronous replication ships the commit after acknowledging it): the new primary
 * then holds the event under its claim's lease, and its handlers would run again once the lease
 * ends. Writing the settle again is harmless where it was kept: both statements change only a
 * row still leased for the attempt they name, so a kept settle is found stale and left alone.
 * Releases are not kept (a release lowers the attempt count, see `OutboxCompleter`), nor settles
 * of events placed for ordered handlers (their settle also moves their key on).
 */
export class WrittenSettles {
  private entries: Array<{ at: number; item: Settle }> = [];

  /** Settles of one statement that the server wrote (`stale` ids excepted), at `at` (epoch ms). */
  remember(items: readonly Settle[], stale: ReadonlySet<string>, at = Date.now()): void {
    for (const item of items) {
      if (item.kind !== 'delivered' && item.kind !== 'failed') continue;
      if (item.record.sequenced || stale.has(item.record.id)) continue;
      this.entries.push({ at, item });
    }
    // Trimmed in steps, so that each step's copy is paid for by as many settles.
    if (this.entries.length >= 2 * REMEMBERED) this.entries = this.entries.slice(-REMEMBERED);
  }

  /** Takes those written at `from` (epoch ms) or later, and forgets every one. */
  takeSince(from: number): WrittenAgain {
    const taken: WrittenAgain = { delivered: [], failed: [] };
    for (const { at, item } of this.entries.slice(-REMEMBERED)) {
      if (at < from) continue;
      if (item.kind === 'delivered') taken.delivered.push(item.settle);
      if (item.kind === 'failed') taken.failed.push(item.settle);
    }
    this.entries = [];
    return taken;
  }
}
