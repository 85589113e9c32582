import { Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import type { AppConfig } from '../config/app.config';
import { OrganizationsModule } from '../organizations/organizations.module';
import { WebhookDeliveriesQuery } from './webhook-deliveries.query';
import { WebhookDestinations } from './webhook-destinations';
import { WebhookEndpoints } from './webhook-endpoints';
import { WebhookFanout } from './webhook-fanout';
import { WEBHOOK_SENDER_OPTIONS, WebhookSender, type WebhookSenderOptions } from './webhook-sender';
import { WebhooksController } from './webhooks.controller';
import { WebhooksService } from './webhooks.service';

/**
 * Webhooks on the outbox's one queue: endpoints subscribe to public event types; the
 * transactional `webhook-fanout` handler emits one `webhook.delivery` outbox event per
 * subscribed endpoint, and the `webhook-sender` handler POSTs each, signed per Standard
 * Webhooks, with its own timeout and retry schedule and the outbox's dead state and replay.
 */
@Module({
  imports: [OrganizationsModule],
  controllers: [WebhooksController],
  providers: [
    WebhooksService,
    WebhookEndpoints,
    WebhookDeliveriesQuery,
    WebhookFanout,
    WebhookSender,
    {
      provide: WebhookDestinations,
      inject: [ConfigService],
      useFactory: (config: ConfigService<AppConfig, true>) =>
        new WebhookDestinations({
          allowPrivateAddresses:
            config.get('WEBHOOK_ALLOW_PRIVATE_ADDRESSES', { infer: true }) === '1',
        }),
    },
    {
      provide: WEBHOOK_SENDER_OPTIONS,
      inject: [ConfigService],
      useFactory: (config: ConfigService<AppConfig, true>): WebhookSenderOptions => ({
        timeoutMs: config.get('WEBHOOK_TIMEOUT_MS', { infer: true }),
      }),
    },
  ],
})
export class WebhooksModule {}
