import type { OutboxRecord } from '../store/lease/lease.types';
import type { ClaimLease } from './outbox.executor';
import type { RegisteredHandler } from '../handlers/registered-handler';

/** A claimed event waiting for a free slot. */
export interface QueuedEvent {
  record: OutboxRecord;
  /** Its handlers, looked up once when its claim came back. */
  handlers: readonly RegisteredHandler[];
  lease: ClaimLease;
  /** `Date.now()` after which it may no longer start: it goes back to the table instead. */
  startBy: number;
}

/**
 * Claimed events waiting for a slot of this instance, oldest claim first. A claim can then ask
 * for more rows than slots are free, and a slot that frees takes the next event at once instead
 * of waiting for a claim's round trip. An event waits at most until its `startBy` (the local
 * queue's TTL, or earlier when its handlers' budget would otherwise outlast the lease); past it,
 * it is given back unstarted so another instance can take it.
 */
export class LocalQueue {
  private readonly events: QueuedEvent[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;

  /** `onExpiry`: the earliest `startBy` waiting has passed (no slot took the event in time). */
  constructor(private readonly onExpiry: () => void) {}

  get length(): number {
    return this.events.length - this.head;
  }

  push(event: QueuedEvent): void {
    this.events.push(event);
    if (event.startBy < this.timerAt) this.planExpiry();
  }

  /**
   * The next event that may still start and is `ready` (a chained event waits for the one before
   * it: see `KeyChains`), or undefined. Events past their `startBy` met on the way are handed to
   * `expired`; events not ready stay, in their order.
   */
  take(
    now: number,
    expired: (event: QueuedEvent) => void,
    ready: (event: QueuedEvent) => boolean = () => true,
  ): QueuedEvent | undefined {
    let i = this.head;
    while (i < this.events.length) {
      const event = this.events[i];
      const live = event.startBy >= now;
      if (live && !ready(event)) {
        i++;
        continue;
      }
      if (i === this.head) this.head++;
      else this.events.splice(i, 1);
      if (live) {
        // The expiry timer may now fire early; `expire` plans it again then.
        this.compact();
        return event;
      }
      expired(event);
      i = Math.max(i, this.head);
    }
    this.compact();
    return undefined;
  }

  /** Events already past their `startBy`, removed (they are at the front: oldest claim first). */
  expire(now: number): QueuedEvent[] {
    const gone: QueuedEvent[] = [];
    while (this.head < this.events.length && this.events[this.head].startBy < now) {
      gone.push(this.events[this.head++]);
    }
    this.compact();
    this.planExpiry();
    return gone;
  }

  /** Every waiting event, removed (shutdown gives them back). */
  drain(): QueuedEvent[] {
    const all = this.events.slice(this.head);
    this.events.length = 0;
    this.head = 0;
    this.planExpiry();
    return all;
  }

  /**
   * A timer for the earliest `startBy` waiting, so an event no slot takes still goes back. The
   * expiring owner calls `expire`, which plans the next one.
   */
  private planExpiry(): void {
    let soonest = Infinity;
    for (let i = this.head; i < this.events.length; i++) {
      soonest = Math.min(soonest, this.events[i].startBy);
    }
    if (soonest === this.timerAt) return;
    clearTimeout(this.timer);
    this.timerAt = soonest;
    if (soonest === Infinity) return;
    this.timer = setTimeout(
      () => {
        this.timerAt = Infinity;
        this.onExpiry();
      },
      Math.max(0, soonest - Date.now() + 1),
    );
  }

  private compact(): void {
    if (this.head === this.events.length) {
      this.events.length = 0;
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.events.length) {
      this.events.splice(0, this.head);
      this.head = 0;
    }
  }
}
