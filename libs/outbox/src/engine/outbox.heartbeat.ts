import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { InstanceReport, InstanceReportStore } from '../store/instance-report.store';
import { delay } from '../common/delay.util';
import { RateLimitedLog } from '../common/rate-limited-log.util';

/** How often a running instance reports in. */
export const INSTANCE_REPORT_MS = 10_000;

/** The longest a stopping instance waits to remove its report. */
const STOP_WAIT_MS = 500;

/**
 * A running instance's report of itself in `outbox_dispatcher` (the table of instances), every
 * `INSTANCE_REPORT_MS` and at each change of state, so an operator sees every instance, not only
 * the one that serves the page. A report that fails (the database is away, the table is not migrated yet) is tried
 * again at the next beat and logged at most once a minute; it never touches delivery.
 */
export class OutboxHeartbeat {
  readonly id = `${hostname()}/${process.pid}/${randomBytes(3).toString('hex')}`;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private readonly failures: RateLimitedLog;
  private stopped = false;

  constructor(
    private readonly store: InstanceReportStore,
    private readonly snapshot: () => Omit<InstanceReport, 'id' | 'host' | 'pid'>,
    warn: (line: string) => void,
  ) {
    this.failures = new RateLimitedLog(warn, 1, 60_000);
  }

  start(): void {
    this.stopped = false;
    this.beat();
    this.timer = setInterval(() => this.beat(), INSTANCE_REPORT_MS);
    this.timer.unref();
  }

  /** Reports now (a change of state), unless a report is already on its way. */
  beat(): void {
    if (this.stopped) return;
    this.running ??= this.store
      .report({ id: this.id, host: hostname(), pid: process.pid, ...this.snapshot() })
      .then((result) => {
        if (!result.ok) this.failures.log(`Outbox instance report failed: ${result.error.message}`);
      })
      .finally(() => {
        this.running = undefined;
      });
  }

  /**
   * Stops reporting and removes the report, waiting at most `STOP_WAIT_MS`: with the database
   * away, a shutdown does not wait for it, and nothing is sent after that wait (the caller then
   * abandons the repository's statements, and one started later would hold the pool open). The
   * report then shows the instance silent, and is cleared a day later.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.timer = undefined;
    let expired = false;
    const wait = delay(STOP_WAIT_MS);
    try {
      await Promise.race([
        Promise.resolve(this.running).then(() =>
          expired ? undefined : this.store.forget(this.id),
        ),
        wait.promise.then(() => {
          expired = true;
        }),
      ]);
    } finally {
      wait.cancel();
    }
  }
}
