import type { DynamicModule } from '@nestjs/common';
import { OutboxBridgeModule, natsJetStream } from '@app/outbox/bridge';
import type { AppConfig } from '../config/app.config';
import { EVENT_TYPES } from './event-catalog';

/** The relay's handler name, kept in each event's deliveries. */
export const NATS_RELAY = 'nats-relay';

/**
 * With `NATS_URL` set, every catalog event also goes to NATS JetStream for services outside this
 * app, on `saas.<type>`, each organization's events in the order they committed (the ordering
 * key is the event's aggregate unless it names one). A relay is an outbox handler like the
 * others: it retries while NATS is away, and its dead events show on the dashboard.
 */
export function natsRelay(config: AppConfig): DynamicModule[] {
  if (!config.NATS_URL) return [];
  return [
    OutboxBridgeModule.forRoot({
      name: NATS_RELAY,
      events: EVENT_TYPES,
      ordered: true,
      transport: natsJetStream({
        servers: config.NATS_URL,
        subject: (event) => `saas.${event.type}`,
      }),
    }),
  ];
}
