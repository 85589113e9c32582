/**
 * At most `limit` lines per `windowMs`; the lines held back are counted and reported with the
 * next line let through. A failing downstream makes every event fail at once, and a log that
 * repeats the same failure ten thousand times hides everything else in it.
 */
export class RateLimitedLog {
  private windowStart = 0;
  private sent = 0;
  private suppressed = 0;

  constructor(
    private readonly write: (line: string) => void,
    private readonly limit = 20,
    private readonly windowMs = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  log(line: string): void {
    const now = this.now();
    if (now - this.windowStart >= this.windowMs) {
      this.windowStart = now;
      this.sent = 0;
    }
    if (this.sent >= this.limit) {
      this.suppressed++;
      return;
    }
    this.sent++;
    const held = this.suppressed;
    this.suppressed = 0;
    this.write(held > 0 ? `${line} (${held} similar lines held back before this one)` : line);
  }
}
