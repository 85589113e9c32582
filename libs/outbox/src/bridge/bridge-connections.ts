import { Injectable } from '@nestjs/common';
import type { BrokerConnectionStatus } from './bridge.types';

/** What health reads of a relay or an inbox. */
export interface BridgeEndpoint {
  /** The relay's handler name, or the inbox's name. */
  name: string;
  role: 'relay' | 'inbox';
  status(): BrokerConnectionStatus;
}

/** Every relay and inbox of the app, as each registers itself at boot. */
@Injectable()
export class BridgeConnections {
  private readonly endpoints = new Map<string, BridgeEndpoint>();

  add(endpoint: BridgeEndpoint): void {
    const key = `${endpoint.role}:${endpoint.name}`;
    if (this.endpoints.has(key)) {
      throw new Error(`Two outbox ${endpoint.role}s are named "${endpoint.name}"`);
    }
    this.endpoints.set(key, endpoint);
  }

  list(): BridgeEndpoint[] {
    return [...this.endpoints.values()];
  }
}
