import type { INestApplication } from '@nestjs/common';
import type { OutboxModuleOptions } from '@app/outbox';
import { OutboxBridgeModule, type OutboxBridgeOptions } from '@app/outbox/bridge';
import { createOutboxApp, withDefaults, type OutboxAppOptions } from '../../support/outbox-app';

/**
 * The outbox of a bridge test: a poll every 200 ms, so an event whose publish failed is tried
 * again within the test's bounds even when no NOTIFY wakes the engine.
 */
export function bridgeOutbox(options: OutboxModuleOptions = {}): OutboxModuleOptions {
  return withDefaults({ tuning: { pollIntervalMs: 200 } }, options);
}

/** An app whose outbox (see `bridgeOutbox`) relays through one bridge. */
export function createRelayApp(
  url: string,
  relay: OutboxBridgeOptions,
  outbox: OutboxModuleOptions,
  more: Pick<OutboxAppOptions, 'providers'> = {},
): Promise<INestApplication> {
  return createOutboxApp({
    url,
    outbox: bridgeOutbox(outbox),
    imports: [OutboxBridgeModule.forRoot(relay)],
    ...more,
  });
}
