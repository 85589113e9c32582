import type { OutboxModuleOptions } from '../outbox.options';

/**
 * Options for `OutboxModule.forRoot` in a test: the engine does not start (the test drains
 * with `drainUntilIdle`), no LISTEN connection is opened and no retention timer runs, so a test
 * decides when events are delivered and leaves nothing behind at `app.close()`.
 */
export function outboxTestingOptions(options: OutboxModuleOptions = {}): OutboxModuleOptions {
  return {
    ...options,
    autoStart: false,
    listen: { ...options.listen, enabled: false },
    retention: { ...options.retention, enabled: false },
  };
}
