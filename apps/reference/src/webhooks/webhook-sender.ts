import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import type { Subscription } from 'rxjs';
import { Webhook } from 'standardwebhooks';
import { retryDelayMs, scrubError } from '@app/outbox';
import { WebhookDeliveryRepository, type ClaimedDelivery } from './webhook-delivery.repository';
import { WebhookWake } from './webhook-wake';

export const WEBHOOK_SENDER_OPTIONS = Symbol('WEBHOOK_SENDER_OPTIONS');

export interface WebhookSenderOptions {
  /** Budget of one POST, response body included. */
  timeoutMs: number;
  /** Attempts before a delivery is dead. */
  maxAttempts: number;
  /** Claim period when no wake arrives (retries falling due are found by it). */
  pollIntervalMs: number;
  /** First retry delay; doubles per attempt up to `retryMaxMs`, less up to 20 % jitter. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** POSTs in flight at once, per instance. */
  concurrency: number;
  /** Added to `timeoutMs` for the lease, so a settle lands before the lease ends. */
  leaseMarginMs: number;
}

const RETRY_JITTER = 0.2;
/** How much of a failing response's body is kept in `last_error`. */
const ERROR_BODY_CHARS = 300;

type AttemptResult =
  { ok: true; status: number } | { ok: false; status: number | null; error: string };

/**
 * Sends pending deliveries: claims due rows by lease (`FOR UPDATE SKIP LOCKED`, database
 * clock), POSTs each signed body with a timeout, and settles it guarded by the claim's attempt
 * count, so a settle that arrives after the row was claimed again writes nothing. Runs from
 * application bootstrap; a wake from the fan-out or the poll starts a claim. At shutdown it
 * stops claiming and waits for the POSTs in flight (each bounded by `timeoutMs`).
 *
 * Delivery is at least once: a crash between a 2xx and its settle sends the row again after
 * the lease, with the same `webhook-id`, which receivers use to drop duplicates.
 */
@Injectable()
export class WebhookSender implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('WebhookSender');
  private readonly inFlight = new Set<Promise<void>>();
  private running = false;
  private draining: Promise<void> | null = null;
  private drainAgain = false;
  private poll: NodeJS.Timeout | undefined;
  private subscription: Subscription | undefined;

  constructor(
    private readonly deliveries: WebhookDeliveryRepository,
    private readonly wakeSignal: WebhookWake,
    @Inject(WEBHOOK_SENDER_OPTIONS) private readonly options: WebhookSenderOptions,
  ) {}

  get leaseMs(): number {
    return this.options.timeoutMs + this.options.leaseMarginMs;
  }

  onApplicationBootstrap(): void {
    this.running = true;
    this.subscription = this.wakeSignal.wakes.subscribe(() => this.wake());
    this.poll = setInterval(() => this.wake(), this.options.pollIntervalMs);
    this.wake();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.running = false;
    clearInterval(this.poll);
    this.subscription?.unsubscribe();
    await this.draining;
    await Promise.allSettled([...this.inFlight]);
  }

  /** Claims now (or right after the claim under way), if there is room for more POSTs. */
  wake(): void {
    if (!this.running) return;
    if (this.draining) {
      this.drainAgain = true;
      return;
    }
    this.draining = this.drain().finally(() => {
      this.draining = null;
      if (this.drainAgain) {
        this.drainAgain = false;
        this.wake();
      }
    });
  }

  private async drain(): Promise<void> {
    while (this.running) {
      const room = this.options.concurrency - this.inFlight.size;
      if (room <= 0) return;
      let claimed: ClaimedDelivery[];
      try {
        claimed = await this.deliveries.claim(room, this.leaseMs);
      } catch (err) {
        // The poll tries again; nothing was leased.
        this.logger.warn(`claim failed: ${scrubError(err)}`);
        return;
      }
      for (const delivery of claimed) this.track(this.deliver(delivery));
      if (claimed.length < room) return;
    }
  }

  private track(sending: Promise<void>): void {
    this.inFlight.add(sending);
    void sending.finally(() => {
      this.inFlight.delete(sending);
      // A slot is free: take what fell due meanwhile.
      this.wake();
    });
  }

  /** One attempt of one delivery, settled; never rejects. */
  private async deliver(delivery: ClaimedDelivery): Promise<void> {
    try {
      const result = delivery.enabled
        ? await this.post(delivery)
        : { ok: false as const, status: null, error: 'endpoint disabled' };
      if (result.ok) {
        const settled = await this.deliveries.markDelivered(
          delivery.id,
          delivery.attempts,
          result.status,
        );
        if (!settled) this.logger.warn(`delivery ${delivery.id}: stale settle, nothing written`);
        return;
      }
      const dead = !delivery.enabled || delivery.attempts >= this.options.maxAttempts;
      const outcome = await this.deliveries.markFailed({
        id: delivery.id,
        attempts: delivery.attempts,
        status: result.status,
        error: result.error,
        retryMs: retryDelayMs(delivery.attempts, {
          baseMs: this.options.retryBaseMs,
          maxMs: this.options.retryMaxMs,
          jitter: RETRY_JITTER,
        }),
        dead,
      });
      if (!outcome.settled) {
        this.logger.warn(`delivery ${delivery.id}: stale settle, nothing written`);
      } else if (outcome.dead) {
        this.logger.error(
          `delivery ${delivery.id} (${delivery.eventType}) is dead after ${delivery.attempts} attempts: ${result.error}`,
        );
      } else {
        this.logger.warn(
          `delivery ${delivery.id} (${delivery.eventType}) attempt ${delivery.attempts} failed: ${result.error}`,
        );
      }
    } catch (err) {
      // The settle failed (database unreachable): the row keeps its lease and is claimed again
      // when it ends, so the receiver may see this webhook-id twice.
      this.logger.warn(`delivery ${delivery.id}: settle failed: ${scrubError(err)}`);
    }
  }

  /** Signs and POSTs the body; any non-2xx, timeout or network error is a failed attempt. */
  private async post(delivery: ClaimedDelivery): Promise<AttemptResult> {
    const payload = JSON.stringify(delivery.body);
    const now = new Date();
    let signature: string;
    try {
      signature = new Webhook(delivery.secret).sign(delivery.id, now, payload);
    } catch (err) {
      // Never the secret itself: only that it could not be used.
      return { ok: false, status: null, error: `cannot sign: ${scrubError(err)}` };
    }
    const signal = AbortSignal.timeout(this.options.timeoutMs);
    try {
      const response = await fetch(delivery.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'webhook-id': delivery.id,
          'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
          'webhook-signature': signature,
        },
        body: payload,
        // A redirect is an answer of the endpoint, not permission to POST elsewhere.
        redirect: 'manual',
        signal,
      });
      if (response.status >= 200 && response.status < 300) {
        await response.body?.cancel().catch(() => undefined);
        return { ok: true, status: response.status };
      }
      const text = await response.text().catch(() => '');
      const excerpt = text.trim().slice(0, ERROR_BODY_CHARS);
      return {
        ok: false,
        status: response.status,
        error: scrubError(`HTTP ${response.status}${excerpt ? `: ${excerpt}` : ''}`),
      };
    } catch (err) {
      return {
        ok: false,
        status: null,
        error: describeFetchError(err, signal, this.options.timeoutMs),
      };
    }
  }
}

/** `fetch failed` says little; its cause (ECONNREFUSED, a TLS error) says what happened. */
function describeFetchError(err: unknown, signal: AbortSignal, timeoutMs: number): string {
  if (signal.aborted) return `TimeoutError: no complete response within ${timeoutMs} ms`;
  const cause = (err as { cause?: unknown } | null)?.cause;
  const text = cause ? `${scrubError(err)} (${scrubError(cause)})` : scrubError(err);
  return scrubError(text);
}
