import { Inject, Injectable } from '@nestjs/common';
import { Webhook } from 'standardwebhooks';
import { OnOutboxEvent, scrubError, type HandlerContext, type OutboxEvent } from '@app/outbox';
import {
  STANDARD_WEBHOOKS_SCHEDULE_MS,
  WEBHOOK_DELIVERY_EVENT,
  WEBHOOK_SENDER,
  type WebhookDeliveryPayload,
} from './webhook-delivery';
import { WebhookEndpoints } from './webhook-endpoints';

export const WEBHOOK_SENDER_OPTIONS = Symbol('WEBHOOK_SENDER_OPTIONS');

export interface WebhookSenderOptions {
  /** Budget of one POST, response body included; the handler's own budget adds a second. */
  timeoutMs: number;
}

/** How much of a failing response's body is kept in the error. */
const ERROR_BODY_CHARS = 300;

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
 *
 * Delivery is at least once: a crash between a 2xx and the settle sends it again after the
 * lease, with the same `webhook-id`, which receivers use to drop duplicates.
 */
@Injectable()
export class WebhookSender {
  constructor(
    private readonly endpoints: WebhookEndpoints,
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
    let response: Response;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'webhook-id': webhookId,
          'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
          'webhook-signature': signature,
        },
        body: payload,
        // A redirect is an answer of the endpoint, not permission to POST elsewhere.
        redirect: 'manual',
        signal: AbortSignal.any([timeout, budget]),
      });
    } catch (err) {
      throw new WebhookAttemptError(describeFetchError(err, timeout, this.options.timeoutMs), null);
    }
    if (response.status >= 200 && response.status < 300) {
      await response.body?.cancel().catch(() => undefined);
      return;
    }
    const text = await response.text().catch(() => '');
    const excerpt = text.trim().slice(0, ERROR_BODY_CHARS);
    throw new WebhookAttemptError(
      scrubError(`HTTP ${response.status}${excerpt ? `: ${excerpt}` : ''}`),
      response.status,
    );
  }
}

/** `fetch failed` says little; its cause (ECONNREFUSED, a TLS error) says what happened. */
function describeFetchError(err: unknown, timeout: AbortSignal, timeoutMs: number): string {
  if (timeout.aborted) return `TimeoutError: no complete response within ${timeoutMs} ms`;
  const cause = (err as { cause?: unknown } | null)?.cause;
  const text = cause ? `${scrubError(err)} (${scrubError(cause)})` : scrubError(err);
  return scrubError(text);
}
