/**
 * A counting semaphore whose waits end with their signal: what bounds the handler transactions
 * (each holds a pool connection for its whole run, so without a bound, events with several
 * transactional handlers could take every connection and leave none for the claims and settles
 * that free them) and a relay's messages awaiting their confirm.
 */
export class AbortableSemaphore {
  private free: number;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly size: number) {
    this.free = size;
  }

  /**
   * Resolves with a release function once a place is free; rejects with the signal's reason if
   * it aborts first (a handler's budget keeps running while it waits).
   */
  acquire(signal: AbortSignal): Promise<() => void> {
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    if (this.free > 0) {
      this.free--;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        signal.removeEventListener('abort', onAbort);
        resolve(this.releaser());
      };
      const onAbort = () => {
        const index = this.waiting.indexOf(grant);
        if (index !== -1) this.waiting.splice(index, 1);
        reject(signal.reason as Error);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(grant);
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    };
  }
}
