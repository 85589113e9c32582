import { Module, type DynamicModule } from '@nestjs/common';
import { BridgeConnections } from './bridge-connections';
import { OutboxBridgeCoreModule } from './bridge-core.module';
import { assertBridgeOptions, type OutboxBridgeOptions } from './outbox-bridge.options';
import { relayClass, type OutboxRelay } from './relay.handler';

/** The injection token of the relay named `name` (its transport, for a test or a probe). */
export const getOutboxRelayToken = (name: string): string => `OutboxRelay:${name}`;

/**
 * Relays events to a broker through a named outbox handler: an event is delivered to the relay
 * when the broker confirmed it, and retried, announced dead and replayed like any handler's.
 * Import it beside `OutboxModule`, once per relay.
 *
 * @example
 * OutboxBridgeModule.forRoot({
 *   name: 'to-nats',
 *   events: ['invoice.paid'],
 *   transport: natsJetStream({ servers: 'nats://nats:4222' }),
 * })
 */
@Module({})
export class OutboxBridgeModule {
  static forRoot(options: OutboxBridgeOptions): DynamicModule {
    assertBridgeOptions(options);
    const Relay = relayClass(options);
    const token = getOutboxRelayToken(options.name);
    return {
      module: OutboxBridgeModule,
      imports: [OutboxBridgeCoreModule],
      providers: [
        {
          provide: token,
          inject: [BridgeConnections],
          useFactory: (connections: BridgeConnections): OutboxRelay => {
            const relay = new Relay();
            connections.add({
              name: options.name,
              role: 'relay',
              status: () => relay.transport.status(),
            });
            return relay;
          },
        },
      ],
      exports: [token],
    };
  }
}
