import { onAbort } from '../common/abort-subscribers.util';

/**
 * How many of a relay's publishes may wait for their broker's confirm at once. A relay gives
 * its event's slot back once its message is sent, so this, not the engine's slots, bounds the
 * messages it has out; a publish that finds the window full waits for room holding its slot,
 * which stops the engine from claiming more than it can send.
 */
export class PublishWindow {
  private open = 0;
  private readonly waiters: Array<() => void> = [];

  constructor(readonly size: number) {}

  /** Publishes waiting for their confirm now. */
  get inFlight(): number {
    return this.open;
  }

  /** Resolves once a place is free and taken; rejects with the signal's reason if it aborts first. */
  enter(signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    if (this.open < this.size) {
      this.open++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const take = (): void => {
        stop();
        this.open++;
        resolve();
      };
      const stop = onAbort(signal, () => {
        const at = this.waiters.indexOf(take);
        if (at >= 0) this.waiters.splice(at, 1);
        const reason: unknown = signal.reason;
        reject(reason instanceof Error ? reason : new Error(`aborted: ${String(reason)}`));
      });
      this.waiters.push(take);
    });
  }

  /** Frees the place `enter` took, handing it to the oldest waiter. */
  leave(): void {
    this.open--;
    this.waiters.shift()?.();
  }
}
