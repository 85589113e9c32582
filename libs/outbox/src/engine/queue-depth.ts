/**
 * About how much work, in time, the local queue holds under a backlog. Enough that a claim's
 * round trip (a few ms, more under load) never leaves a slot idle; little enough that a claim
 * goes out every few tens of ms whatever the handlers' speed, so an event that became due (a
 * quiet partition's, under fair claims) waits about that long to be claimed, not for a queue of
 * slow handlers' work to drain.
 */
export const QUEUE_WORK_MS = 25;

/** Weight of each event in the running means: about the last 50 events count. */
const WEIGHT = 0.02;

/** A running mean of a time per event, `undefined` until the first. */
class RunningMean {
  value: number | undefined;

  add(ms: number, events = 1): void {
    if (!(ms >= 0)) return;
    const weight = Math.min(1, WEIGHT * events);
    this.value = this.value === undefined ? ms : this.value + (ms - this.value) * weight;
  }
}

/**
 * How many claimed events the local queue may hold now. At most `localQueue.size`; none once
 * events waited out their TTL (slots held by slow handlers: claiming more would only give them
 * back, and the events given back are for other instances), doubled each time a slot frees to
 * find the queue empty; and about `QUEUE_WORK_MS` of work at the pace
 * this instance gets through events, never more than the queue's size. That pace is the gap
 * between starts while the queue is not empty (every slot is busy then); until a backlog has
 * shown it, the pace the slots allow (slots ÷ the mean time an event holds one), which is
 * known from any traffic; with neither, two events a slot. With 20 ms handlers on 20 slots (one start a
 * millisecond) that is 25 events rather than 500 (half a second of work).
 */
export class QueueDepth {
  private limit: number;
  private readonly gap = new RunningMean();
  private readonly slotTime = new RunningMean();
  private lastStartAt: number | undefined;

  constructor(
    private readonly size: number,
    private readonly concurrency: number,
  ) {
    this.limit = size;
  }

  /** Events waited out their TTL in the queue: it holds none until slots find it empty. */
  expired(): void {
    this.limit = 0;
  }

  /** A slot freed to find the queue empty: it may hold twice as many again. */
  ranDry(): void {
    if (this.limit < this.size) this.limit = Math.min(this.size, Math.max(1, this.limit * 2));
  }

  /** An event gave its slot back after holding it `ms`. */
  held(ms: number): void {
    this.slotTime.add(ms);
  }

  /** `count` queued events started at `at` (`performance.now()`), the queue not empty after. */
  started(count: number, at: number): void {
    if (count === 0) return;
    if (this.lastStartAt !== undefined) this.gap.add((at - this.lastStartAt) / count, count);
    this.lastStartAt = at;
  }

  /** The queue ran empty: the time until it holds events again is not a gap between starts. */
  emptied(): void {
    this.lastStartAt = undefined;
  }

  /** The events the queue may hold now. */
  get cap(): number {
    const msPerEvent =
      this.gap.value ??
      (this.slotTime.value === undefined ? undefined : this.slotTime.value / this.concurrency);
    // Nothing has run yet (a first backlog): two events a slot, until the first ones show it.
    if (msPerEvent === undefined) return Math.min(this.limit, 2 * this.concurrency);
    const work = Math.ceil(QUEUE_WORK_MS / Math.max(msPerEvent, 1e-3));
    return Math.min(this.limit, Math.max(1, work));
  }
}
