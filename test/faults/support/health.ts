import type { WorkerHealth } from './ipc';
import { sleep, type FaultChild } from './processes';

export interface HealthSample {
  /** When the answer came back. */
  at: number;
  status: 'up' | 'down' | 'no answer';
  message?: string;
}

/**
 * Asks a worker for OutboxHealthIndicator's verdict every `everyMs` until stopped, keeping
 * every answer, so a scenario can see it go down during a fault and up again after.
 */
export class HealthWatch {
  readonly samples: HealthSample[] = [];
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(
    private readonly worker: FaultChild,
    everyMs = 50,
  ) {
    this.loop = (async () => {
      while (!this.stopped && this.worker.alive) {
        try {
          const health = await this.worker.request<WorkerHealth>({ cmd: 'health' }, 3000);
          this.samples.push({ at: Date.now(), status: health.status, message: health.message });
        } catch {
          this.samples.push({ at: Date.now(), status: 'no answer' });
        }
        await sleep(everyMs);
      }
    })();
  }

  /** The first sample at or after `sinceMs` with `status`, or undefined. */
  first(status: HealthSample['status'], sinceMs: number): HealthSample | undefined {
    return this.samples.find((s) => s.at >= sinceMs && s.status === status);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}
