/**
 * The producer's one planned wake: the earliest of the times asked for wins, and a later one
 * asked meanwhile is dropped (the earlier wake looks for all the work due by then).
 */
export class WakeTimer {
  private timer: NodeJS.Timeout | undefined;
  private at = Infinity;

  /** Calls `wake` at `at` (epoch ms, local clock), unless a wake is planned by then already. */
  plan(at: number, wake: () => void): void {
    if (at >= this.at) return;
    clearTimeout(this.timer);
    this.at = at;
    this.timer = setTimeout(
      () => {
        this.at = Infinity;
        wake();
      },
      Math.max(0, at - Date.now()),
    );
  }

  clear(): void {
    clearTimeout(this.timer);
    this.at = Infinity;
  }
}
