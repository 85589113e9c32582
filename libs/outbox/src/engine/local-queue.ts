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
  /** The lane it waits in: its partition under fair claims, one lane for all otherwise. */
  lane: string;
}

/** One lane's events, oldest claim first; `head` skips the ones already taken. */
interface Lane {
  events: QueuedEvent[];
  head: number;
}

/**
 * Claimed events waiting for a slot of this instance. A claim can then ask for more rows than
 * slots are free, and a slot that frees takes the next event at once instead of waiting for a
 * claim's round trip. An event waits at most until its `startBy` (the local queue's TTL, or
 * earlier when its handlers' budget would otherwise outlast the lease); past it, it is given back
 * unstarted so another instance can take it.
 *
 * Events wait in lanes (their partition, under fair claims), oldest claim first within a lane,
 * and slots take from the lanes in turn: an event of a quiet partition starts at the next free
 * slot, not behind the queued events of a partition that floods. With one lane it is one queue
 * in claim order.
 */
export class LocalQueue {
  private readonly lanes = new Map<string, Lane>();
  /** The lanes with events, in the order slots take from them; `turn` is the next one's index. */
  private readonly ring: string[] = [];
  private turn = 0;
  private size = 0;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;

  /** `onExpiry`: the earliest `startBy` waiting has passed (no slot took the event in time). */
  constructor(private readonly onExpiry: () => void) {}

  get length(): number {
    return this.size;
  }

  push(event: QueuedEvent): void {
    let lane = this.lanes.get(event.lane);
    if (!lane) {
      lane = { events: [], head: 0 };
      this.lanes.set(event.lane, lane);
      this.ring.push(event.lane);
    }
    lane.events.push(event);
    this.size++;
    if (event.startBy < this.timerAt) this.planExpiry();
  }

  /**
   * The next event that may still start and is `ready` (a chained event waits for the one before
   * it: see `KeyChains`), from the lanes in turn, or undefined. Events past their `startBy` met on
   * the way are handed to `expired`; events not ready stay, in their order.
   */
  take(
    now: number,
    expired: (event: QueuedEvent) => void,
    ready: (event: QueuedEvent) => boolean = () => true,
  ): QueuedEvent | undefined {
    for (let looked = 0; looked < this.ring.length;) {
      const index = (this.turn %= this.ring.length);
      const key = this.ring[index];
      const event = this.takeFrom(this.lanes.get(key)!, now, expired, ready);
      if (this.dropIfEmpty(key, index)) {
        if (event) return event;
        continue;
      }
      this.turn = index + 1;
      if (event) return event;
      looked++;
    }
    return undefined;
  }

  /** Events already past their `startBy`, removed (each lane's oldest claims are at its front). */
  expire(now: number): QueuedEvent[] {
    const gone: QueuedEvent[] = [];
    for (let index = this.ring.length - 1; index >= 0; index--) {
      const key = this.ring[index];
      const lane = this.lanes.get(key)!;
      while (lane.head < lane.events.length && lane.events[lane.head].startBy < now) {
        gone.push(lane.events[lane.head++]);
        this.size--;
      }
      this.dropIfEmpty(key, index);
    }
    this.planExpiry();
    return gone;
  }

  /** Every waiting event, removed (shutdown gives them back). */
  drain(): QueuedEvent[] {
    const all: QueuedEvent[] = [];
    for (const key of this.ring) {
      const lane = this.lanes.get(key)!;
      all.push(...lane.events.slice(lane.head));
    }
    this.lanes.clear();
    this.ring.length = 0;
    this.turn = 0;
    this.size = 0;
    this.planExpiry();
    return all;
  }

  private takeFrom(
    lane: Lane,
    now: number,
    expired: (event: QueuedEvent) => void,
    ready: (event: QueuedEvent) => boolean,
  ): QueuedEvent | undefined {
    let i = lane.head;
    while (i < lane.events.length) {
      const event = lane.events[i];
      const live = event.startBy >= now;
      if (live && !ready(event)) {
        i++;
        continue;
      }
      if (i === lane.head) lane.head++;
      else lane.events.splice(i, 1);
      this.size--;
      // The expiry timer may now fire early; `expire` plans it again then.
      if (live) return event;
      expired(event);
      i = Math.max(i, lane.head);
    }
    return undefined;
  }

  /** Removes the lane at `index` of the ring once it has no events; whether it did. */
  private dropIfEmpty(key: string, index: number): boolean {
    const lane = this.lanes.get(key)!;
    if (lane.head < lane.events.length) {
      if (lane.head > 1024 && lane.head * 2 > lane.events.length) {
        lane.events.splice(0, lane.head);
        lane.head = 0;
      }
      return false;
    }
    this.lanes.delete(key);
    this.ring.splice(index, 1);
    if (this.turn > index) this.turn--;
    return true;
  }

  /**
   * A timer for the earliest `startBy` waiting, so an event no slot takes still goes back. The
   * expiring owner calls `expire`, which plans the next one.
   */
  private planExpiry(): void {
    let soonest = Infinity;
    for (const lane of this.lanes.values()) {
      for (let i = lane.head; i < lane.events.length; i++) {
        soonest = Math.min(soonest, lane.events[i].startBy);
      }
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
}
