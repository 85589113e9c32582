import type { OutboxRecord } from '../store/lease/lease.types';
import { ALL, heldAfter, KeyChains, leftUndone, type Blocked } from './key-chains';

/** What an event that follows no other one in its claim inherits: nothing undone. */
const NOTHING_BEFORE: Blocked = new Set<string>();

/** A handler as ordering sees it: its name, and whether it is ordered. */
interface OrderedOrNot {
  readonly name: string;
  readonly policy: { readonly ordered: unknown };
}

/** An event ready to run, with what the events before it in its claim left undone. */
export interface InChain {
  record: OutboxRecord;
  before: Blocked;
}

/**
 * What the executor asks of per-key ordering, and nothing more: the chains of a key's events
 * that one claim took (each runs after the one before it settled, holding the ordered handlers
 * that one left undone), told of each event's end. The claim's own test (`heldBehindEarlier`)
 * holds what earlier events outside the claim hold; this holds what those inside it do.
 */
export class KeyOrdering {
  private readonly chains = new KeyChains();

  /** A claim's records, before any starts. */
  expect(records: readonly OutboxRecord[]): void {
    this.chains.expect(records);
  }

  /** Whether the event may start now: the one before it in its chain, if any, has settled. */
  ready(record: OutboxRecord): boolean {
    return this.chains.ready(record);
  }

  /**
   * For an event that an event of its claim comes before: the event as it runs once that one
   * settled, with the ordered handlers it left undone added to `held`. Undefined for any other
   * event (most), which runs at once as claimed: nothing is made for it.
   */
  before(record: OutboxRecord, handlers: readonly OrderedOrNot[]): Promise<InChain> | undefined {
    const before = this.chains.before(record);
    if (!before) return undefined;
    return before.then((blocked) => {
      const held = heldAfter(record, orderedOf(handlers), blocked);
      return { record: held === record.held ? record : { ...record, held }, before: blocked };
    });
  }

  /** Whether an event of the claim follows this one: then it must hear of its end. */
  followed(record: OutboxRecord): boolean {
    return this.chains.followed(record);
  }

  /**
   * The event settled (`written`) with `succeeded` delivered now, or did not (stale, lost): the
   * one after it in its chain may start, holding what this one left undone (everything, when
   * nothing was written).
   */
  settled(
    { record, before = NOTHING_BEFORE }: { record: OutboxRecord; before?: Blocked },
    handlers: readonly OrderedOrNot[],
    written: boolean,
    succeeded: readonly string[],
  ): void {
    if (!written) return this.chains.end(record, ALL);
    const delivered = new Set(succeeded);
    const done = (name: string) => delivered.has(name) || Object.hasOwn(record.deliveries, name);
    this.chains.end(record, leftUndone(orderedOf(handlers), done, before));
  }

  /** Cut short by a shutdown: nothing after it in its chain may run an ordered handler. */
  abandoned(record: OutboxRecord): void {
    this.chains.end(record, ALL);
  }

  /** Goes back unstarted: the event after it in its chain must not run what it holds. */
  givenBack(record: OutboxRecord): void {
    this.chains.giveBack(record);
  }
}

function orderedOf(handlers: readonly OrderedOrNot[]): string[] {
  return handlers.filter((h) => h.policy.ordered).map((h) => h.name);
}
