import type { OutboxRecord } from '../store/lease/lease.types';

/**
 * What an event of a chain leaves undone for the events after it: the ordered handlers not
 * delivered for it or an event before it in the claim, or `ALL` when it was not settled (given
 * back, abandoned, stale, lost): then nothing after it may run an ordered handler.
 */
export type Blocked = ReadonlySet<string> | typeof ALL;
export const ALL = 'all';

interface Link {
  done: boolean;
  blocked: Blocked;
  promise: Promise<Blocked>;
  resolve: (blocked: Blocked) => void;
}

/**
 * The chains of a key's events that one claim took (`OutboxRecord.after`): each event runs after
 * the one before it has settled, and its ordered handlers that an event before it left undone
 * are held for it, as an earlier event outside the claim holds them (`held`). A link belongs to
 * the waiting event of one claim: from that claim until the event starts or goes back.
 */
export class KeyChains {
  /** By the id of the event that waits: a new claim of the event before makes a new link. */
  private readonly links = new Map<string, Link>();
  /** Event id → the event after it in its latest claim. */
  private readonly next = new Map<string, string>();

  /** A claim's records: each event that follows another gets its link before anything starts. */
  expect(records: readonly OutboxRecord[]): void {
    for (const record of records) {
      if (record.after === null) continue;
      let resolve!: (blocked: Blocked) => void;
      const promise = new Promise<Blocked>((r) => (resolve = r));
      this.links.set(record.id, { done: false, blocked: ALL, promise, resolve });
      this.next.set(record.after, record.id);
    }
  }

  /** Whether the event before `record` in its chain (if any) has settled. */
  ready(record: OutboxRecord): boolean {
    return record.after === null || this.links.get(record.id)?.done !== false;
  }

  /**
   * What the events before `record` left undone, once the one just before it has settled;
   * undefined for an event no other one in its claim comes before. Its link is then used up.
   */
  before(record: OutboxRecord): Promise<Blocked> | undefined {
    if (record.after === null) return undefined;
    const link = this.links.get(record.id);
    if (!link) return undefined;
    return link.promise.finally(() => {
      if (this.links.get(record.id) === link) this.links.delete(record.id);
    });
  }

  /** Whether an event of the claim follows `record`. */
  followed(record: OutboxRecord): boolean {
    return this.next.has(record.id);
  }

  /** `record` has settled (or will never run): the event after it may go on. */
  end(record: OutboxRecord, blocked: Blocked): void {
    const successor = this.next.get(record.id);
    if (successor === undefined) return;
    this.next.delete(record.id);
    const link = this.links.get(successor);
    if (!link || link.done) return;
    link.done = true;
    link.blocked = blocked;
    link.resolve(blocked);
  }

  /** Goes back unstarted: nothing is waited for, and what follows it may not run. */
  giveBack(record: OutboxRecord): void {
    this.links.delete(record.id);
    this.end(record, ALL);
  }
}

/** `held` with the ordered handlers of the event that a chain before it left undone. */
export function heldAfter(
  record: OutboxRecord,
  ordered: readonly string[],
  blocked: Blocked,
): readonly string[] {
  const more = ordered.filter(
    (name) => (blocked === ALL || blocked.has(name)) && !record.held.includes(name),
  );
  return more.length === 0 ? record.held : [...record.held, ...more];
}

/**
 * What a settled event leaves undone for the events after it: its ordered handlers that are not
 * delivered, with what the events before it left.
 */
export function leftUndone(
  ordered: readonly string[],
  delivered: (name: string) => boolean,
  inherited: Blocked,
): Blocked {
  if (inherited === ALL) return ALL;
  const undone = new Set(inherited);
  for (const name of ordered) if (!delivered(name)) undone.add(name);
  return undone;
}
