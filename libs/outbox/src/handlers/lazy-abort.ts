/**
 * An AbortController made only when someone reads its signal. Most handlers never look at
 * theirs, and a controller with its EventTarget is the largest single allocation of a handler
 * run; an abort before the first read is kept and applied when the signal is made.
 */
export class LazyAbort {
  private controller: AbortController | undefined;
  private aborted = false;
  private reason: unknown;

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.controller?.abort(reason);
  }
}
