import type { OutboxModuleOptions } from '@app/outbox';
import type { ChildConfig } from './ipc';
import type { WorkerOptions } from './scenario';

/**
 * Outbox settings every fault worker starts from: short leases and quick retries so a crashed
 * claim comes back within seconds, attempts high enough that faults never make an event dead
 * (only poison events should be), and no retention sweep deleting the rows being counted.
 */
export const WORKER_DEFAULTS = {
  leaseMs: 4000,
  handlerTimeoutMs: 2000,
  batchSize: 50,
  concurrency: 10,
  maxAttempts: 1000,
  pollIntervalMs: 2000,
  failedDrainRetryMs: 250,
  shutdownGraceMs: 3000,
  retry: { baseMs: 100, maxMs: 1000, jitter: 0.2 },
  listen: { reconnectMinMs: 100, reconnectMaxMs: 1000 },
  retention: { enabled: false },
} satisfies OutboxModuleOptions;

export function workerConfig(
  dbUrl: string,
  options: WorkerOptions,
  breakMode: string | undefined,
): ChildConfig {
  const outbox = options.outbox ?? {};
  return {
    role: 'worker',
    url: options.url ?? dbUrl,
    recordUrl: options.recordUrl ?? dbUrl,
    handlerDelayMs: options.handlerDelayMs,
    bridge: options.bridge,
    breakMode,
    httpPort: options.httpPort,
    outbox: {
      ...WORKER_DEFAULTS,
      ...outbox,
      autoStart: !options.holdDispatcher,
      retry: { ...WORKER_DEFAULTS.retry, ...outbox.retry },
      listen: { ...WORKER_DEFAULTS.listen, ...outbox.listen },
      retention: { ...WORKER_DEFAULTS.retention, ...outbox.retention },
    },
  };
}

/** Where a producer's connections go and how they are bounded; the scenario's database by default. */
export interface ProducerOptions {
  /**
   * Where its TypeORM connections go, and with them the `fault_emitted` row it writes in each
   * emitting transaction (a producer records nothing elsewhere: `recordUrl` is the workers').
   */
  url?: string;
  /** See `ChildConfig.queryTimeoutMs`. */
  queryTimeoutMs?: number;
  /** Its name in the runner's output; `producer` by default. */
  label?: string;
}

export function producerConfig(dbUrl: string, options: ProducerOptions = {}): ChildConfig {
  const url = options.url ?? dbUrl;
  return {
    role: 'producer',
    url,
    recordUrl: url,
    outbox: {},
    queryTimeoutMs: options.queryTimeoutMs,
  };
}
