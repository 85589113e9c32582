import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { delay } from '../common/delay.util';
import { RetentionStore } from '../store/retention.store';
import type { OutboxScheduler } from './outbox.scheduler';
import { OUTBOX_OPTIONS, OUTBOX_SCHEDULER } from '../outbox.tokens';

/** Name of the sweep's interval in the app's `SchedulerRegistry`. */
export const OUTBOX_RETENTION_JOB = 'outbox-retention-sweep';

/**
 * Deletes delivered events past the retention, and discarded ones past theirs, on an interval: registered with the app's
 * `@nestjs/schedule` SchedulerRegistry when it imports ScheduleModule (so the job shows up next to
 * its other jobs), a plain timer otherwise. Live and dead events are never swept; a discarded
 * event only after `discardedRetentionMs`. It also wakes the parked events of ordered keys that
 * nothing ahead holds any more (settled by an instance of a version without per-key ordering),
 * and forgets the ordering bookkeeping of keys with nothing left to do.
 */
@Injectable()
export class OutboxRetentionSweeper implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Outbox');
  private running: Promise<number> | undefined;
  private readonly stopping = new AbortController();

  constructor(
    private readonly store: RetentionStore,
    @Inject(OUTBOX_SCHEDULER) private readonly scheduler: OutboxScheduler,
    @Inject(OUTBOX_OPTIONS) private readonly options: ResolvedOutboxOptions,
  ) {}

  onApplicationBootstrap(): void {
    const { enabled, sweepIntervalMs } = this.options.retention;
    if (!enabled) return;
    const interval = setInterval(() => void this.sweep(), sweepIntervalMs);
    this.scheduler.addInterval(OUTBOX_RETENTION_JOB, interval);
  }

  /**
   * Stops the schedule and the running sweep between two batches, waiting for it no longer than
   * the shutdown grace: the batch in flight is itself bounded by the statement timeout.
   */
  async onApplicationShutdown(): Promise<void> {
    if (this.scheduler.doesExist('interval', OUTBOX_RETENTION_JOB)) {
      this.scheduler.deleteInterval(OUTBOX_RETENTION_JOB);
    }
    this.stopping.abort();
    if (!this.running) return;
    const grace = delay(this.options.shutdownGraceMs);
    try {
      await Promise.race([this.running, grace.promise]);
    } finally {
      grace.cancel();
    }
  }

  /** One sweep now; a sweep still running is joined rather than doubled. Returns rows deleted. */
  sweep(): Promise<number> {
    if (this.stopping.signal.aborted) return Promise.resolve(0);
    this.running ??= this.sweepOnce().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async sweepOnce(): Promise<number> {
    const { retentionMs, discardedRetentionMs, batchSize } = this.options.retention;
    const bounds = { batchSize, signal: this.stopping.signal };
    const delivered = await this.store.sweep({ retentionMs, ...bounds });
    const discarded = await this.store.sweepDiscarded({
      retentionMs: discardedRetentionMs,
      ...bounds,
    });
    const stranded = await this.store.wakeStranded(bounds);
    if (!stranded.ok) {
      this.logger.warn(`Outbox sweep of parked events failed: ${stranded.error.message}`);
    } else if (stranded.value > 0) {
      this.logger.warn(
        `Outbox woke ${stranded.value} parked events that no earlier event of their key held ` +
          '(a settle did not tell their key: an instance without per-key ordering?)',
      );
    }
    const forgotten = await this.store.forgetDoneKeys(bounds);
    if (!forgotten.ok) {
      this.logger.warn(`Outbox sweep of finished ordering keys failed: ${forgotten.error.message}`);
    }
    let deleted = 0;
    for (const [what, result] of [
      ['delivered', delivered],
      ['discarded', discarded],
    ] as const) {
      if (!result.ok) {
        this.logger.warn(
          `Outbox retention sweep of ${what} events failed: ${result.error.message}`,
        );
      } else if (result.value > 0) {
        this.logger.log(`Outbox retention sweep deleted ${result.value} ${what} events`);
        deleted += result.value;
      }
    }
    return deleted;
  }
}
