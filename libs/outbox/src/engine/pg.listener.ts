import { Client, escapeIdentifier, type ClientConfig, type Notification } from 'pg';
import type { PgListenerState } from './pg-listener.types';
import { delay } from '../common/delay.util';
import { scrubError } from '../common/scrub-error.util';

export interface PgListenerOptions {
  /** Connection settings; a dedicated pg.Client is created from them, never a pool client. */
  client: ClientConfig;
  /** The LISTEN channel. */
  channel: string;
  /** pg `connectionTimeoutMillis` of every connect. */
  connectTimeoutMs: number;
  /** Bound on LISTEN and on each probe; a probe that takes longer means a half-open socket. */
  queryTimeoutMs: number;
  /** Period of the `select 1` probe. */
  probeIntervalMs: number;
  /** First delay before reconnecting; doubles after each failed attempt. */
  reconnectMinMs: number;
  /** Upper bound of the reconnect delay. */
  reconnectMaxMs: number;
}

export interface PgListenerHandlers {
  /** Each NOTIFY on the channel. */
  onNotify(payload: string): void;
  /**
   * Once per successful re-connection, after LISTEN is active again: notifications sent while
   * the listener was away are lost, so the owner should drain what it missed. Not called for the
   * LISTEN that start() awaited, but called when LISTEN first succeeds after start() resolved on
   * a failed attempt: start() told the owner nothing was listening, so anything in between was
   * missed all the same.
   */
  onReconnect(): void;
  /** Scrubbed text of connection problems, for the owner's logger. */
  onError?(message: string): void;
  /**
   * The probe got no answer in time, or its connection died: the server this connection reached
   * is gone, or a moved address left the connection half-open, and likely the owner's other
   * connections to it too.
   */
  onLost?(): void;
}

/** Fraction of a reconnect delay drawn at random, so many workers do not reconnect in step. */
const RECONNECT_JITTER = 0.1;

/**
 * The dedicated LISTEN connection of the outbox engine. It keeps one pg.Client listening on
 * one channel and replaces it, with exponential backoff, whenever the connection fails: an
 * `error` or `end` event, a failed connect or LISTEN, or a probe that fails or hangs.
 *
 * The probe exists because a half-open TCP connection (a NAT or firewall that silently dropped
 * the flow, a server host that vanished) raises no event at all: the client would wait for
 * notifications forever. A `select 1` that gets no answer within `queryTimeoutMs` is the only
 * signal, and the socket is then destroyed rather than ended, because a graceful end waits for a
 * FIN that will never arrive.
 */
export class PgListener {
  private current: PgListenerState = 'idle';
  private reconnectCount = 0;
  /** The live client; every event of any other client is stale and ignored. */
  private client: Client | null = null;
  /** Failed attempts since the last successful LISTEN; drives the backoff. */
  private failures = 0;
  private probeTimer: NodeJS.Timeout | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  /** The connect attempt in flight, so stop() can wait until it has unwound. */
  private attempt: Promise<void> | null = null;
  private started: Promise<void> | null = null;
  private stopping: Promise<void> | null = null;

  constructor(
    private readonly options: PgListenerOptions,
    private readonly handlers: PgListenerHandlers,
  ) {}

  get state(): PgListenerState {
    return this.current;
  }

  get reconnects(): number {
    return this.reconnectCount;
  }

  /**
   * Resolves once the first connect+LISTEN succeeded or failed; after a failure the listener
   * keeps retrying in the background. Never rejects: a database that is down at boot must not
   * stop the application, the engine's poll covers the gap.
   */
  start(): Promise<void> {
    if (this.current !== 'idle') return this.started ?? Promise.resolve();
    this.current = 'connecting';
    this.started = this.connect();
    return this.started;
  }

  /**
   * The database answers again (the engine's claims came back after failing): a listener waiting
   * out its backoff connects at once, and its backoff starts over. Nothing to do while an attempt
   * is in flight or the connection listens.
   */
  reconnectNow(): void {
    if (this.current !== 'reconnecting' || this.retryTimer === null) return;
    clearTimeout(this.retryTimer);
    this.failures = 0;
    void this.connect();
  }

  /**
   * The engine's claims fail (the server may be gone, or a virtual IP moved and left this
   * connection half-open): probe now rather than at the next period, so a dead connection is
   * replaced within `queryTimeoutMs`. Nothing to do while a probe is in flight or no connection
   * listens.
   */
  probeNow(): void {
    const client = this.client;
    if (this.current !== 'listening' || this.probeTimer === null || client === null) return;
    this.clearProbe();
    void this.probe(client);
  }

  /**
   * The engine's statements show the server gone or no longer the primary: this connection
   * reaches the same server, and may be half-open (a moved virtual IP answers nothing), so it is
   * closed and a new one made at once rather than after a probe's timeout. Nothing to do while
   * no connection listens.
   */
  replaceNow(): void {
    const client = this.client;
    if (this.current !== 'listening' || client === null) return;
    this.drop(client, 'the server was lost on another connection');
    this.reconnectNow();
  }

  /**
   * Stops probing and reconnecting and closes the client, waiting at most `budgetMs` (default
   * `queryTimeoutMs`) for a graceful goodbye. Idempotent.
   */
  stop(budgetMs = this.options.queryTimeoutMs): Promise<void> {
    this.stopping ??= this.shutdown(Math.max(0, Math.min(budgetMs, this.options.queryTimeoutMs)));
    return this.stopping;
  }

  private async shutdown(budgetMs: number): Promise<void> {
    const wasListening = this.current === 'listening';
    this.current = 'stopped';
    this.clearTimers();
    const client = this.client;
    // Detached first: whatever the client emits from now on is stale, notifications included.
    this.client = null;
    if (client) {
      if (wasListening) await this.endGracefully(client, budgetMs);
      // A client still connecting is destroyed: pg's end() during connect never settles the
      // pending connect() promise, which would leave the attempt (and start()) hanging.
      else destroySocket(client);
    }
    await this.attempt;
  }

  /** One connect+LISTEN attempt. Never rejects: every failure becomes a scheduled retry. */
  private connect(): Promise<void> {
    this.retryTimer = null;
    if (this.current === 'stopped') return Promise.resolve();
    let client: Client;
    try {
      client = this.createClient();
    } catch (error) {
      // pg parses the settings in the constructor (a malformed connection string throws there);
      // start() must still resolve, so this is one more failed attempt.
      this.scheduleReconnect();
      this.report(`invalid connection settings: ${scrubError(error)}`);
      return Promise.resolve();
    }
    this.client = client;
    this.attempt = this.listenOn(client);
    return this.attempt;
  }

  private async listenOn(client: Client): Promise<void> {
    try {
      await client.connect();
      await client.query(`LISTEN ${escapeIdentifier(this.options.channel)}`);
    } catch (error) {
      this.drop(client, 'connect or LISTEN failed', error);
      return;
    }
    // stop() or a connection event may have taken the client while LISTEN was in flight.
    if (client === this.client) this.onListening(client);
  }

  private onListening(client: Client): void {
    // Only attempts made from 'reconnecting' count: the first one is what start() reports.
    const isReconnect = this.current === 'reconnecting';
    this.current = 'listening';
    this.failures = 0;
    this.scheduleProbe(client);
    if (!isReconnect) return;
    this.reconnectCount += 1;
    this.safely(() => this.handlers.onReconnect());
  }

  private createClient(): Client {
    const client = new Client({
      // OS keepalive as a second line of defence; the probe is what bounds detection time.
      keepAlive: true,
      ...this.options.client,
      connectionTimeoutMillis: this.options.connectTimeoutMs,
      // pg only fails the query on this timeout and leaves the socket as it is; drop() then
      // destroys it, which is what frees a half-open connection.
      query_timeout: this.options.queryTimeoutMs,
    });
    // The 'error' listener is never removed: an EventEmitter 'error' without a listener would
    // crash the process, and a dropped client may still emit one while its socket closes.
    client.on('error', (error) => this.drop(client, 'connection error', error));
    // pg emits 'end' before a pending connect() rejects, so this is often the first word of a
    // connection the server closed without an error message.
    client.on('end', () => this.drop(client, 'connection closed without an error from the server'));
    client.on('notification', (message) => this.onNotification(client, message));
    return client;
  }

  private onNotification(client: Client, message: Notification): void {
    if (client !== this.client || message.channel !== this.options.channel) return;
    this.safely(() => this.handlers.onNotify(message.payload ?? ''));
  }

  /**
   * Gives up on `client` and schedules the next attempt. Idempotent per client: a dying client
   * typically reports the same failure several times (rejected query, 'error', 'end').
   */
  private drop(client: Client, context: string, error?: unknown): void {
    if (client !== this.client) return;
    this.client = null;
    this.clearProbe();
    destroySocket(client);
    this.scheduleReconnect();
    this.report(error === undefined ? context : `${context}: ${scrubError(error)}`);
  }

  private scheduleReconnect(): void {
    if (this.current === 'stopped') return;
    this.current = 'reconnecting';
    const delay = this.backoff(this.failures);
    this.failures += 1;
    this.retryTimer = setTimeout(() => void this.connect(), delay);
  }

  /** `reconnectMinMs` doubled per failure up to `reconnectMaxMs`, minus up to 10% jitter. */
  private backoff(failures: number): number {
    const { reconnectMinMs, reconnectMaxMs } = this.options;
    // The exponent is capped so 2 ** failures never becomes Infinity after a long outage.
    const base = Math.min(reconnectMaxMs, reconnectMinMs * 2 ** Math.min(failures, 30));
    // Jitter only shortens the delay, so reconnectMaxMs stays a true upper bound.
    return Math.round(base * (1 - Math.random() * RECONNECT_JITTER));
  }

  /** Chained timeouts, not an interval: a slow probe must never overlap the next one. */
  private scheduleProbe(client: Client): void {
    this.probeTimer = setTimeout(() => {
      this.probeTimer = null;
      void this.probe(client);
    }, this.options.probeIntervalMs);
  }

  private async probe(client: Client): Promise<void> {
    try {
      await client.query('select 1');
    } catch (error) {
      const current = client === this.client;
      this.drop(client, 'probe failed (connection dead or half-open)', error);
      if (current) this.safely(() => this.handlers.onLost?.());
      return;
    }
    if (client === this.client) this.scheduleProbe(client);
  }

  /**
   * A healthy connection says goodbye (Terminate) so the server ends the session at once. The
   * wait is bounded because end() on a half-open socket waits for a close that never comes.
   */
  private async endGracefully(client: Client, budgetMs: number): Promise<void> {
    const deadline = delay(budgetMs);
    try {
      await Promise.race([client.end().catch(() => undefined), deadline.promise]);
    } finally {
      deadline.cancel();
      destroySocket(client);
    }
  }

  private clearTimers(): void {
    this.clearProbe();
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
  }

  private clearProbe(): void {
    if (this.probeTimer) clearTimeout(this.probeTimer);
    this.probeTimer = null;
  }

  /** Owner callbacks run inside pg's socket handlers, where a throw would be uncaught. */
  private safely(callback: () => void): void {
    try {
      callback();
    } catch (error) {
      this.report(`handler threw: ${scrubError(error)}`);
    }
  }

  private report(message: string): void {
    try {
      this.handlers.onError?.(message);
    } catch {
      // A failing logger must not take the listener down with it.
    }
  }
}

/**
 * Closes the client's socket without a goodbye. pg 8 has no public way to do this; `end()`
 * only destroys the socket when a query is active and otherwise waits for the server's FIN.
 * Harmless on a socket that is already closed.
 */
function destroySocket(client: Client): void {
  client.connection.stream.destroy();
}
