import { Global, Module } from '@nestjs/common';
import { BridgeConnections } from './bridge-connections';
import { OutboxBridgeHealthIndicator } from './outbox-bridge.health';

/** What every relay and inbox module shares: the list of connections and their indicator. */
@Global()
@Module({
  providers: [BridgeConnections, OutboxBridgeHealthIndicator],
  exports: [BridgeConnections, OutboxBridgeHealthIndicator],
})
export class OutboxBridgeCoreModule {}
