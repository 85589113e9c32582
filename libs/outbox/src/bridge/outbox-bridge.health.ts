import { Injectable } from '@nestjs/common';
import { indicatorResult } from '../common/indicator-result.util';
import type { BrokerConnectionStatus } from './bridge.types';
import { BridgeConnections } from './bridge-connections';

export type OutboxBridgeHealthData = {
  status: 'up' | 'down';
  /** Each relay and inbox by `relay:<name>` / `inbox:<name>`. */
  connections: Record<string, BrokerConnectionStatus>;
  message?: string;
};

export type OutboxBridgeHealthResult<Key extends string = 'brokers'> = Record<
  Key,
  OutboxBridgeHealthData
>;

/**
 * Terminus indicator of the broker connections: down while any relay or inbox is not connected,
 * with each one's state, since when, and why it was last lost. Use it for an alert or a status
 * page rather than readiness: a broker that is away makes relays retry and inboxes wait, and
 * taking every pod out of rotation for it would stop the app's own traffic too.
 */
@Injectable()
export class OutboxBridgeHealthIndicator {
  constructor(private readonly connections: BridgeConnections) {}

  isHealthy<Key extends string = 'brokers'>(
    key: Key = 'brokers' as Key,
  ): OutboxBridgeHealthResult<Key> {
    const result = indicatorResult<Key, Omit<OutboxBridgeHealthData, 'status'>>(key);
    const connections: Record<string, BrokerConnectionStatus> = {};
    const away: string[] = [];
    for (const endpoint of this.connections.list()) {
      const id = `${endpoint.role}:${endpoint.name}`;
      connections[id] = endpoint.status();
      if (connections[id].state !== 'connected') away.push(id);
    }
    if (away.length === 0) return result.up({ connections });
    return result.down({ connections, message: `not connected: ${away.join(', ')}` });
  }
}
