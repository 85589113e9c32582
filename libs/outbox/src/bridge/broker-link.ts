import { Logger } from '@nestjs/common';
import { delay } from '../common/delay.util';
import { scrubError } from '../common/scrub-error.util';
import { retryDelayMs } from '../handlers/retry-backoff.util';
import type { BrokerConnectionState, BrokerConnectionStatus } from './bridge.types';

/** A connection that lived this long was fine: the next loss starts the backoff over. */
const STABLE_MS = 10_000;

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
  private stop: () => void = () => undefined;
  private readonly stopped = new Promise<void>((resolve) => (this.stop = resolve));
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
    this.stop();
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

  /**
   * One attempt after another. Each attempt's events act on that attempt alone: a late `closed`
   * from a connection the loop has already left (a second channel of it reporting the same
   * loss) must not cut short the attempt after it, which would leave a connection open behind.
   */
  private async run(): Promise<void> {
    for (let attempt = 1; !this.stopping;) {
      let wake = (): void => undefined;
      const lost = new Promise<void>((resolve) => (wake = resolve));
      this.wakeLoop = wake;
      let current = true;
      let opened: C | undefined;
      const events: LinkEvents = {
        down: (error) => {
          if (current) this.lost(error, 'reconnecting');
        },
        up: () => {
          if (current && !this.stopping) this.setState('connected');
        },
        closed: (error) => {
          if (!current) return;
          current = false;
          this.lost(error, 'reconnecting');
          if (opened !== undefined) {
            if (this.client === opened) this.client = undefined;
            // A channel can die while its connection lives on: close what is left of it.
            void this.closeQuietly(opened);
          }
          wake();
        },
      };
      try {
        const client = await this.driver.open(events);
        opened = client;
        if (this.stopping || !current) {
          // Opened while the app was closing, or lost before it was used.
          current = false;
          await this.closeQuietly(client);
          if (this.stopping) return;
          throw new Error(this.lastError ?? 'connection lost while it was set up');
        }
        this.client = client;
        this.setState('connected');
        this.firstUp?.();
        const upAt = Date.now();
        await lost;
        if (this.stopping) return;
        // A connection that keeps dying as soon as it opens backs off like one that fails.
        attempt = Date.now() - upAt < STABLE_MS ? attempt + 1 : 1;
        await this.backOff(attempt - 1);
      } catch (error) {
        current = false;
        if (this.stopping) return;
        this.lost(error, this.state === 'connecting' ? 'connecting' : 'reconnecting');
        await this.backOff(attempt++);
      }
    }
  }

  /** The wait before attempt `attempt + 1`; raced with the stop alone, never skipped. */
  private async backOff(attempt: number): Promise<void> {
    const wait = delay(retryDelayMs(attempt, { ...this.options.reconnect, jitter: 0.2 }));
    await Promise.race([wait.promise, this.stopped]);
    wait.cancel();
  }

  /** Closes a client nobody uses any more, within the connect bound, errors ignored. */
  private async closeQuietly(client: C): Promise<void> {
    const bound = delay(this.options.connectTimeoutMs);
    await Promise.race([this.driver.close(client).catch(() => undefined), bound.promise]);
    bound.cancel();
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
