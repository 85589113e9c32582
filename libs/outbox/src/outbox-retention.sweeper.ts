import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import type { ResolvedOutboxOptions } from './outbox.options';
import { OutboxRepository } from './outbox.repository';
import { OUTBOX_OPTIONS, OUTBOX_SCHEDULER } from './outbox.tokens';

/** Name of the sweep's interval in the `SchedulerRegistry`. */
export const OUTBOX_RETENTION_JOB = 'outbox-retention-sweep';

/**
 * Deletes delivered events past the retention on an interval registered with
 * `@nestjs/schedule`'s SchedulerRegistry (the app's own when it imports ScheduleModule, so the
 * job shows up next to its other jobs). Live and dead events are never swept.
 */
@Injectable()
export class OutboxRetentionSweeper implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Outbox');
  private running: Promise<number> | undefined;

  constructor(
    private readonly repository: OutboxRepository,
    @Inject(OUTBOX_SCHEDULER) private readonly scheduler: SchedulerRegistry,
    @Inject(OUTBOX_OPTIONS) private readonly options: ResolvedOutboxOptions,
  ) {}

  onApplicationBootstrap(): void {
    const { enabled, sweepIntervalMs } = this.options.retention;
    if (!enabled) return;
    const interval = setInterval(() => void this.sweep(), sweepIntervalMs);
    this.scheduler.addInterval(OUTBOX_RETENTION_JOB, interval);
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.scheduler.doesExist('interval', OUTBOX_RETENTION_JOB)) {
      this.scheduler.deleteInterval(OUTBOX_RETENTION_JOB);
    }
    await this.running;
  }

  /** One sweep now; a sweep still running is joined rather than doubled. Returns rows deleted. */
  sweep(): Promise<number> {
    this.running ??= this.sweepOnce().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async sweepOnce(): Promise<number> {
    const { retentionMs, batchSize } = this.options.retention;
    const result = await this.repository.sweep({ retentionMs, batchSize });
    if (!result.ok) {
      this.logger.warn(`Outbox retention sweep failed: ${result.error.message}`);
      return 0;
    }
    if (result.value > 0) this.logger.log(`Outbox retention sweep deleted ${result.value} events`);
    return result.value;
  }
}
