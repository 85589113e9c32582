import { Logger } from '@nestjs/common';
import { delay } from '../common/delay.util';
import { scrubError } from '../common/scrub-error.util';
import { retryDelayMs } from '../handlers/retry-backoff.util';
import type { BrokerConnectionState, BrokerConnectionStatus } from './bridge.types';

export interface BrokerLinkOptions {
  /** Bound on one connection attempt, and on how long `connect()` waits at boot. */
  connectTimeoutMs: number;
  /** Backoff between attempts: doubles from `baseMs` to `maxMs`, with up to 20 % off at random. */
  reconnect: { baseMs: number; maxMs: number };
}

/** How a transport opens and closes its client. */
export interface LinkDriver<C> {
  /** One connection attempt, within the connect bound; `events` reports on it afterwards. */
  open(events: LinkEvents): Promise<C>;
  close(client: C): Promise<void>;
}

/** What a transport tells its link about the connection it opened. */
export interface LinkEvents {
  /** The client lost the connection and is getting it back by itself (NATS does). */
  down(error: unknown): void;
  /** The client is connected again. */
  up(): void;
  /** The connection is gone for good: the link opens a new one after a backoff. */
  closed(error: unknown): void;
}

/**
 * Owns one broker connection for a transport: opens it with a bound, opens it again with backoff
 * whenever it is lost for good, and says where it stands. `connect()` at boot waits for the first
 * connection only up to the bound, so a broker that is away delays nothing: the transport fails
 * its publishes (events retry) until the link is up.
 */
export class BrokerLink<C> {
  private readonly logger = new Logger('OutboxBridge');
  private client: C | undefined;
  private state: BrokerConnectionState = 'connecting';
  private since = new Date();
  private lastError: string | null = null;
  private stopping = false;
  private loop: Promise<void> | undefined;
  private wakeLoop: (() => void) | undefined;
  private firstUp: (() => void) | undefined;
  private readonly firstConnection = new Promise<void>((resolve) => (this.firstUp = resolve));

  constructor(
    readonly kind: string,
    private readonly label: string,
    private readonly options: BrokerLinkOptions,
    private readonly driver: LinkDriver<C>,
  ) {}

  /** Starts the link; resolves once connected or once the connect bound has passed. */
  async connect(): Promise<void> {
    this.loop ??= this.run();
    const bound = delay(this.options.connectTimeoutMs);
    await Promise.race([this.firstConnection, bound.promise]);
    bound.cancel();
    if (this.state !== 'connected') {
      this.logger.warn(
        `${this.label}: not connected after ${this.options.connectTimeoutMs} ms ` +
          `(${this.lastError ?? 'no answer yet'}); retrying in the background`,
      );
    }
  }

  /** The open client, or undefined while there is none to use. */
  current(): C | undefined {
    return this.state === 'connected' ? this.client : undefined;
  }

  /** The open client, or an error that says why there is none (for a failed delivery). */
  require(): C {
    const client = this.current();
    if (client) return client;
    throw new Error(
      `${this.label} is not connected (${this.state}` +
        `${this.lastError ? `: ${this.lastError}` : ''})`,
    );
  }

  status(): BrokerConnectionStatus {
    return {
      kind: this.kind,
      state: this.state,
      since: this.since.toISOString(),
      lastError: this.lastError,
    };
  }

  /** Stops reconnecting and closes the client, giving up after `timeoutMs`. */
  async close(timeoutMs: number): Promise<void> {
    this.stopping = true;
    this.wakeLoop?.();
    const client = this.client;
    this.client = undefined;
    this.setState('closed');
    if (client === undefined) return;
    const bound = delay(timeoutMs);
    const closing = this.driver.close(client).catch((error: unknown) => {
      this.logger.warn(`${this.label}: close failed: ${scrubError(error)}`);
    });
    const finished = await Promise.race([
      closing.then(() => true),
      bound.promise.then(() => false),
    ]);
    bound.cancel();
    if (!finished)
      this.logger.warn(`${this.label}: not closed within ${timeoutMs} ms; left behind`);
  }

  private async run(): Promise<void> {
    for (let attempt = 1; !this.stopping;) {
      const lost = new Promise<void>((resolve) => (this.wakeLoop = resolve));
      const events: LinkEvents = {
        down: (error) => this.lost(error, 'reconnecting'),
        up: () => this.setState('connected'),
        closed: (error) => {
          this.lost(error, 'reconnecting');
          this.client = undefined;
          this.wakeLoop?.();
        },
      };
      try {
        const client = await this.driver.open(events);
        if (this.stopping) {
          // Opened while the app was closing: nobody will use it.
          await this.driver.close(client).catch(() => undefined);
          return;
        }
        this.client = client;
        this.setState('connected');
        this.firstUp?.();
        attempt = 1;
        await lost;
      } catch (error) {
        this.lost(error, this.state === 'connecting' ? 'connecting' : 'reconnecting');
        const wait = delay(retryDelayMs(attempt++, { ...this.options.reconnect, jitter: 0.2 }));
        await Promise.race([wait.promise, lost]);
        wait.cancel();
      }
    }
  }

  private lost(error: unknown, state: BrokerConnectionState): void {
    this.lastError = scrubError(error);
    if (this.stopping) return;
    if (this.state === 'connected')
      this.logger.warn(`${this.label}: connection lost: ${this.lastError}`);
    this.setState(state);
  }

  private setState(state: BrokerConnectionState): void {
    if (this.state === state) return;
    if (state === 'connected' && this.state !== 'connecting')
      this.logger.log(`${this.label}: reconnected`);
    this.state = state;
    this.since = new Date();
  }
}
