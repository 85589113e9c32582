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

export function producerConfig(dbUrl: string): ChildConfig {
  return { role: 'producer', url: dbUrl, recordUrl: dbUrl, outbox: {} };
}
