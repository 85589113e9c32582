import type { WorkerHealth } from './ipc';
import { sleep, type FaultChild } from './processes';

export interface HealthSample {
  /** When the question was sent. */
  sentAt: number;
  /** When the answer came back. */
  at: number;
  status: 'up' | 'down' | 'no answer';
  message?: string;
}

/** One question to a worker about its health; throws (or says 'no answer') when none came. */
export type HealthQuestion = () => Promise<Pick<HealthSample, 'status' | 'message'>>;

/** OutboxHealthIndicator's verdict, asked over IPC. */
function overIpc(worker: FaultChild): HealthQuestion {
  return () => worker.request<WorkerHealth>({ cmd: 'health' }, 3000);
}

/**
 * A probe over HTTP, as the kubelet sends it: 200 is up, 503 down, and anything else (refused,
 * reset, timed out) no answer. `path` on 127.0.0.1 at `port`.
 */
export function overHttp(port: number, path = '/health', timeoutMs = 3000): HealthQuestion {
  return async () => {
    try {
      const res = await fetch(`http://127.0.0.1:${port}${path}`, {
        signal: AbortSignal.timeout(timeoutMs),
      });
      const body = (await res.json().catch(() => ({}))) as {
        error?: { outbox?: { message?: string } };
      };
      if (res.status === 200) return { status: 'up' };
      if (res.status === 503) return { status: 'down', message: body.error?.outbox?.message };
      return { status: 'no answer', message: `HTTP ${res.status}` };
    } catch (error) {
      return { status: 'no answer', message: String(error) };
    }
  };
}

/**
 * Asks a worker for its health every `everyMs` until stopped or the worker exits, keeping every
 * answer, so a scenario can see it go down during a fault and up again after. OutboxHealthIndicator
 * over IPC unless another question is given (`overHttp`).
 */
export class HealthWatch {
  readonly samples: HealthSample[] = [];
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(
    private readonly worker: FaultChild,
    everyMs = 50,
    ask: HealthQuestion = overIpc(worker),
  ) {
    this.loop = (async () => {
      while (!this.stopped && this.worker.alive) {
        const sentAt = Date.now();
        try {
          const { status, message } = await ask();
          this.samples.push({ sentAt, at: Date.now(), status, message });
        } catch {
          this.samples.push({ sentAt, at: Date.now(), status: 'no answer' });
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
