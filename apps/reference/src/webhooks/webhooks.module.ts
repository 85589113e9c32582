import { Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import type { AppConfig } from '../config/app.config';
import { WebhookDeliveryRepository } from './webhook-delivery.repository';
import { WebhookFanout } from './webhook-fanout';
import { WEBHOOK_SENDER_OPTIONS, WebhookSender, type WebhookSenderOptions } from './webhook-sender';
import { WebhookWake } from './webhook-wake';
import { WebhooksController } from './webhooks.controller';
import { WebhooksService } from './webhooks.service';
import { OrganizationsModule } from '../organizations/organizations.module';

const HOUR = 3_600_000;

/**
 * Webhooks: endpoints subscribe to public event types; the `webhook-fanout` outbox handler
 * writes one delivery row per subscribed endpoint, and the `WebhookSender` POSTs them, signed
 * per Standard Webhooks, with retries and a dead state.
 */
@Module({
  imports: [OrganizationsModule],
  controllers: [WebhooksController],
  providers: [
    WebhooksService,
    WebhookDeliveryRepository,
    WebhookWake,
    WebhookFanout,
    WebhookSender,
    {
      provide: WEBHOOK_SENDER_OPTIONS,
      inject: [ConfigService],
      useFactory: (config: ConfigService<AppConfig, true>): WebhookSenderOptions => ({
        timeoutMs: config.get('WEBHOOK_TIMEOUT_MS', { infer: true }),
        maxAttempts: config.get('WEBHOOK_MAX_ATTEMPTS', { infer: true }),
        pollIntervalMs: config.get('WEBHOOK_POLL_INTERVAL_MS', { infer: true }),
        retryBaseMs: config.get('WEBHOOK_RETRY_BASE_MS', { infer: true }),
        retryMaxMs: HOUR,
        concurrency: 10,
        leaseMarginMs: 5000,
      }),
    },
  ],
})
export class WebhooksModule {}
