import type { DynamicModule } from '@nestjs/common';
import {
  OutboxBridgeModule,
  OutboxInboxModule,
  natsJetStream,
  natsJetStreamInbox,
  rabbitMq,
  rabbitMqInbox,
} from '@app/outbox/bridge';
import { FAULT_TX_EVENT } from './fault-handlers';
import type { FaultBridgeConfig } from './ipc';

export const HANDLER_RELAY = 'fault-relay';

/** Quick to notice a broker that went away, so the scenarios stay short. */
const CONNECTION = { connectTimeoutMs: 2000, reconnect: { baseMs: 100, maxMs: 1000 } };

/** The relay and inbox modules a fault worker imports, as an application would write them. */
export function bridgeModules(config: FaultBridgeConfig | undefined): DynamicModule[] {
  if (!config) return [];
  const { broker } = config;
  const modules: DynamicModule[] = [];
  if (config.relay) {
    modules.push(
      OutboxBridgeModule.forRoot({
        name: HANDLER_RELAY,
        events: [FAULT_TX_EVENT],
        transport:
          broker.kind === 'nats'
            ? natsJetStream({ servers: broker.servers, publishTimeoutMs: 1000, ...CONNECTION })
            : rabbitMq({
                url: broker.url,
                exchange: broker.exchange,
                publishTimeoutMs: 1000,
                ...CONNECTION,
              }),
      }),
    );
  }
  if (config.inbox) {
    modules.push(
      OutboxInboxModule.forRoot({
        name: 'fault-inbox',
        retryDelayMs: 200,
        closeTimeoutMs: 2000,
        transport:
          broker.kind === 'nats'
            ? natsJetStreamInbox({
                servers: broker.servers,
                stream: broker.stream,
                consumer: broker.consumer,
                ackWaitMs: 3000,
                ...CONNECTION,
              })
            : rabbitMqInbox({ url: broker.url, queue: broker.queue, ...CONNECTION }),
      }),
    );
  }
  return modules;
}
