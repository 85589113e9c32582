import type { DeliveredSettle, FailedSettle, LimitedSettle } from '../store/lease/lease.types';
import { scrubError } from '../common/scrub-error.util';
import type { Settle } from './settle-statements';

/** Settles remembered at most, the newest kept: enough for seconds of a busy instance. */
const REMEMBERED = 10_000;

/** Settles that can be written again without harm (see `WrittenSettles`). */
export interface WrittenAgain {
  delivered: DeliveredSettle[];
  failed: FailedSettle[];
  limited: LimitedSettle[];
}

/**
 * The delivered, failed and held-by-limit settles this instance wrote lately, to write again after the
 * database failed and answered again. A server that acknowledged a settle may lose it in a
 * failover (asynchronous replication ships the commit after acknowledging it): the new primary
 * then holds the event under its claim's lease, and its handlers would run again once the lease
 * ends. Writing the settle again is harmless where it was kept: each statement changes only a
 * row still leased for the attempt (and, held by limit, the lease) it names, so a kept settle is
 * found stale and left alone.
 * Releases are not kept (a release lowers the attempt count, see `OutboxCompleter`), nor settles
 * of events placed for ordered handlers (their settle also moves their key on).
 */
export class WrittenSettles {
  /** The settles alone, not their events: no payload is kept for this. */
  private entries: Array<
    | { at: number; kind: 'delivered'; settle: DeliveredSettle }
    | { at: number; kind: 'failed'; settle: FailedSettle }
    | { at: number; kind: 'limited'; settle: LimitedSettle }
  > = [];

  /** Settles of one statement that the server wrote (`stale` ids excepted), at `at` (epoch ms). */
  remember(items: readonly Settle[], stale: ReadonlySet<string>, at = Date.now()): void {
    for (const item of items) {
      if (item.record.sequenced || stale.has(item.record.id)) continue;
      if (item.kind === 'delivered')
        this.entries.push({ at, kind: 'delivered', settle: item.settle });
      if (item.kind === 'limited') this.entries.push({ at, kind: 'limited', settle: item.settle });
      if (item.kind !== 'failed') continue;
      // The error's text as the statement wrote it, not the handler's error object and all it holds.
      const { error } = item.settle;
      const settle = { ...item.settle, error: error === null ? null : scrubError(error) };
      this.entries.push({ at, kind: item.kind, settle });
    }
    // Trimmed in steps, so that each step's copy is paid for by as many settles.
    if (this.entries.length >= 2 * REMEMBERED) this.entries = this.entries.slice(-REMEMBERED);
  }

  /** Takes those written at `from` (epoch ms) or later, and forgets every one. */
  takeSince(from: number): WrittenAgain {
    const taken: WrittenAgain = { delivered: [], failed: [], limited: [] };
    for (const entry of this.entries.slice(-REMEMBERED)) {
      if (entry.at < from) continue;
      if (entry.kind === 'delivered') taken.delivered.push(entry.settle);
      else if (entry.kind === 'limited') taken.limited.push(entry.settle);
      else taken.failed.push(entry.settle);
    }
    this.entries = [];
    return taken;
  }
}
