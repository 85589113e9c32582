import { performance } from 'node:perf_hooks';

/** How often the timer ticks: a stall is measured to within this much. */
export const STALL_TICK_MS = 100;

/**
 * How long the event loop stalled lately: a timer ticks every `STALL_TICK_MS`, and each tick
 * that comes late was held up by the loop for that long (a synchronous loop, a long GC pause, a
 * CPU starved process). Each tick's lateness is kept for `windowMs`; `worstMs` is the longest
 * within it, counting a tick overdue right now, so a probe answered just as a stall ends already
 * sees it. The clock is `performance.now()`, which never jumps: a wall clock set back or forward
 * (NTP) is no stall. The timer is unref'd and runs from `start` to `stop` only.
 */
export class EventLoopStalls {
  private timer: NodeJS.Timeout | undefined;
  private lastTick = 0;
  /** Lateness of each tick within the window, oldest first. */
  private readonly ticks: { at: number; lateMs: number }[] = [];
  private stopped = false;

  constructor(private readonly windowMs: number) {}

  /** Starts measuring, once; nothing after `stop`. */
  start(): void {
    if (this.timer || this.stopped) return;
    this.lastTick = performance.now();
    this.timer = setInterval(() => this.tick(), STALL_TICK_MS);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  /** The longest stall (ms) within the last `windowMs`; 0 before `start`. */
  worstMs(): number {
    if (!this.timer) return 0;
    const now = performance.now();
    this.forgetBefore(now - this.windowMs);
    // A tick that is due and has not run: the loop is only now getting to it.
    let worst = this.stopped ? 0 : lateness(now - this.lastTick);
    for (const { lateMs } of this.ticks) worst = Math.max(worst, lateMs);
    return worst;
  }

  private tick(): void {
    const now = performance.now();
    this.ticks.push({ at: now, lateMs: lateness(now - this.lastTick) });
    this.lastTick = now;
    this.forgetBefore(now - this.windowMs);
  }

  private forgetBefore(time: number): void {
    let old = 0;
    while (old < this.ticks.length && this.ticks[old].at < time) old++;
    if (old > 0) this.ticks.splice(0, old);
  }
}

/** How much later than planned a tick `sinceLastMs` after the one before came, in whole ms. */
function lateness(sinceLastMs: number): number {
  return Math.max(0, Math.round(sinceLastMs - STALL_TICK_MS));
}
