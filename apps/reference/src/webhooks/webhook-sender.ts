import { Inject, Injectable } from '@nestjs/common';
import { Webhook } from 'standardwebhooks';
import { OnOutboxEvent, scrubError, type HandlerContext, type OutboxEvent } from '@app/outbox';
import {
  STANDARD_WEBHOOKS_SCHEDULE_MS,
  WEBHOOK_DELIVERY_EVENT,
  WEBHOOK_SENDER,
  type WebhookDeliveryPayload,
} from './webhook-delivery';
import { InternalDestinationError } from './destination-address';
import { WebhookDestinations } from './webhook-destinations';
import { WebhookEndpoints } from './webhook-endpoints';
import { postWebhook, type WebhookAnswer } from './webhook-post';

export const WEBHOOK_SENDER_OPTIONS = Symbol('WEBHOOK_SENDER_OPTIONS');

export interface WebhookSenderOptions {
  /** Budget of one POST, response body included; the handler's own budget adds a second. */
  timeoutMs: number;
}

/** One try of a delivery failed; the message (scrubbed) becomes the event's `last_error`. */
export class WebhookAttemptError extends Error {
  constructor(
    message: string,
    /** The HTTP status, or null when no response came (timeout, refused connection). */
    readonly status: number | null,
  ) {
    super(message);
    this.name = 'WebhookAttemptError';
  }
}

/**
 * POSTs one `webhook.delivery` event to its endpoint, signed per Standard Webhooks with the
 * delivery event's id as `webhook-id`. Any non-2xx answer, timeout or network error throws, and
 * the outbox retries this handler on its own schedule (the Standard Webhooks one by default;
 * `handlers['webhook-sender']` of the outbox options, set from `WEBHOOK_RETRY_SCHEDULE_MS`,
 * replaces it) until the delivery is dead; a dead delivery can be replayed through the API.
 * A disabled endpoint is a failed try too, so re-enabling it within the schedule resumes it.
 * The POST goes to a public address only (WebhookDestinations checks the address it dials),
 * and of a failing answer the tenant sees the status and at most 300 bytes of the body.
 *
 * Delivery is at least once: a crash between a 2xx and the settle sends it again after the
 * lease, with the same `webhook-id`, which receivers use to drop duplicates.
 */
@Injectable()
export class WebhookSender {
  constructor(
    private readonly endpoints: WebhookEndpoints,
    private readonly destinations: WebhookDestinations,
    @Inject(WEBHOOK_SENDER_OPTIONS) private readonly options: WebhookSenderOptions,
  ) {}

  @OnOutboxEvent(WEBHOOK_SENDER, {
    events: [WEBHOOK_DELIVERY_EVENT],
    timeoutMs: 6_000,
    retry: [...STANDARD_WEBHOOKS_SCHEDULE_MS],
  })
  async handle(event: OutboxEvent<WebhookDeliveryPayload>, ctx: HandlerContext): Promise<void> {
    const endpoint = await this.endpoints.find(event.payload.endpointId);
    if (!endpoint) throw new WebhookAttemptError('endpoint no longer exists', null);
    if (!endpoint.enabled) throw new WebhookAttemptError('endpoint disabled', null);
    await this.post(event.id, endpoint.url, endpoint.secret, event.payload, ctx.signal);
  }

  /** Signs and POSTs the body; resolves on a 2xx, throws `WebhookAttemptError` otherwise. */
  private async post(
    webhookId: string,
    url: string,
    secret: string,
    delivery: WebhookDeliveryPayload,
    budget: AbortSignal,
  ): Promise<void> {
    const payload = JSON.stringify(delivery.body);
    const now = new Date();
    let signature: string;
    try {
      signature = new Webhook(secret).sign(webhookId, now, payload);
    } catch (err) {
      // Never the secret itself: only that it could not be used.
      throw new WebhookAttemptError(`cannot sign: ${scrubError(err)}`, null);
    }
    const timeout = AbortSignal.timeout(this.options.timeoutMs);
    let answer: WebhookAnswer;
    try {
      const target = new URL(url);
      // An address in the URL is dialled without a lookup: it is checked here instead.
      this.destinations.checkLiteral(target.hostname);
      answer = await postWebhook({
        url: target,
        headers: {
          'content-type': 'application/json',
          'webhook-id': webhookId,
          'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
          'webhook-signature': signature,
        },
        body: payload,
        signal: AbortSignal.any([timeout, budget]),
        lookup: this.destinations.lookup,
      });
    } catch (err) {
      throw new WebhookAttemptError(describeError(err, timeout, this.options.timeoutMs), null);
    }
    if (answer.status >= 200 && answer.status < 300) return;
    const excerpt = answer.excerpt.trim();
    // scrubError escapes control characters and redacts credentials in what the endpoint said.
    throw new WebhookAttemptError(
      scrubError(`HTTP ${answer.status}${excerpt ? `: ${excerpt}` : ''}`),
      answer.status,
    );
  }
}

/** What went wrong, in one scrubbed line: the timeout, a refused address, or the network error. */
function describeError(err: unknown, timeout: AbortSignal, timeoutMs: number): string {
  if (timeout.aborted) return `TimeoutError: no complete response within ${timeoutMs} ms`;
  if (err instanceof InternalDestinationError) {
    return `refused: ${err.message}, and WEBHOOK_ALLOW_PRIVATE_ADDRESSES is off`;
  }
  return scrubError(err);
}
