import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { setMaxListeners } from 'node:events';
import type { ClientConfig } from 'pg';
import type { DataSource } from 'typeorm';
import type { ResolvedOutboxOptions } from './outbox.options';
import { OutboxRelay, type DeliveredBatch, type DrainReport } from './outbox.relay';
import { OutboxRepository } from './outbox.repository';
import { OUTBOX_DATA_SOURCE, OUTBOX_OPTIONS } from './outbox.tokens';
import { PgListener, type PgListenerState } from './pg-listener';
import { listenerClientConfig } from './listener-client-config';
import { delay } from './delay';
import { scrubError } from './scrub-error';

/** Batches settling while the next one is claimed; more would only queue behind the commit. */
const MAX_SETTLING = 2;

/**
 * How long the dispatcher's shutdown goes on past `shutdownGraceMs` at most: time for the last
 * settles and the listener's goodbye. Its stop returns within the grace plus this, whatever the
 * database does, and leaves no pool connection checked out.
 */
export const SHUTDOWN_MARGIN_MS = 1000;

export type OutboxDispatcherState = 'idle' | 'running' | 'stopping' | 'stopped';

/**
 * The loop around the relay. It drains when a NOTIFY arrives, when the next row falls due,
 * on the poll fallback, right away while batches come back full, after an idle floor when a
 * drain found nothing, and after a pause when a drain failed. It starts at application
 * bootstrap (unless `autoStart` is off) and stops within the shutdown grace.
 */
@Injectable()
export class OutboxDispatcher
  implements OnApplicationBootstrap, OnModuleDestroy, BeforeApplicationShutdown
{
  private readonly logger = new Logger('Outbox');
  private current: OutboxDispatcherState = 'idle';
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private draining: Promise<void> | undefined;
  private wokenWhileDraining = false;
  private stopController = new AbortController();
  private abandonController = new AbortController();
  private listener: PgListener | undefined;
  private stopping: Promise<void> | undefined;
  private lastDrain: Date | null = null;
  private readonly settling = new Set<Promise<void>>();
  private startedAt: Date | null = null;

  constructor(
    private readonly relay: OutboxRelay,
    private readonly repository: OutboxRepository,
    @Inject(OUTBOX_OPTIONS) private readonly options: ResolvedOutboxOptions,
    @Inject(OUTBOX_DATA_SOURCE) private readonly dataSource: DataSource,
  ) {}

  get state(): OutboxDispatcherState {
    return this.current;
  }

  /** The LISTEN connection's state, or `disabled` when `listen.enabled` is off. */
  get listenerState(): PgListenerState | 'disabled' {
    if (!this.options.listen.enabled) return 'disabled';
    return this.listener?.state ?? 'idle';
  }

  /** When the running dispatcher was started. */
  get runningSince(): Date | null {
    return this.current === 'running' ? this.startedAt : null;
  }

  /** When the last drain completed without a store failure. */
  get lastDrainAt(): Date | null {
    return this.lastDrain;
  }

  async onApplicationBootstrap(): Promise<void> {
    if (this.options.autoStart) await this.start();
  }

  /**
   * Normally already stopped by `OutboxShutdownHook` at the first shutdown step; these hooks
   * stop it when that hook could not be placed, and wait for the stop either way.
   */
  onModuleDestroy(): Promise<void> {
    return this.stop();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.stop();
  }

  async start(): Promise<void> {
    if (this.current === 'running' || this.current === 'stopping') return;
    this.current = 'running';
    // A drain a shutdown out of time left behind plans nothing when it ends: ask it to.
    if (this.draining) this.wokenWhileDraining = true;
    this.stopping = undefined;
    this.startedAt = new Date();
    this.stopController = new AbortController();
    this.abandonController = new AbortController();
    // Every running handler listens to it: as many as concurrency times handlers per event.
    setMaxListeners(0, this.abandonController.signal);
    this.warnWithoutConnectTimeout();
    if (this.options.listen.enabled) {
      this.listener = new PgListener(
        {
          client: this.listenerClient(),
          channel: this.options.listen.channel,
          connectTimeoutMs: this.options.listen.connectTimeoutMs,
          queryTimeoutMs: this.options.listen.queryTimeoutMs,
          probeIntervalMs: this.options.listen.probeIntervalMs,
          reconnectMinMs: this.options.listen.reconnectMinMs,
          reconnectMaxMs: this.options.listen.reconnectMaxMs,
        },
        {
          onNotify: () => this.wake(),
          // Notifications sent while the connection was down are lost: drain to catch up.
          onReconnect: () => this.wake(),
          onError: (message) => this.logger.warn(`Outbox listener: ${message}`),
        },
      );
      await this.listener.start();
    }
    this.schedule(0);
  }

  /**
   * Halts claiming at once, releases claimed records whose handlers have not started, waits
   * for the running drain and, once `shutdownGraceMs` is spent, abandons handlers still
   * running (their records keep the lease and are claimed again when it ends).
   */
  async stop(): Promise<void> {
    if (this.current === 'idle' || this.current === 'stopped') {
      this.current = 'stopped';
      return;
    }
    this.stopping ??= this.halt();
    return this.stopping;
  }

  /** Runs one drain now, outside the loop: for tests, scripts and hand-driven workers. */
  drainOnce(): Promise<DrainReport> {
    return this.relay.drain();
  }

  /** Asks for a drain as soon as possible. */
  wake(): void {
    if (this.current !== 'running') return;
    if (this.draining) {
      this.wokenWhileDraining = true;
      return;
    }
    this.schedule(0);
  }

  private async halt(): Promise<void> {
    this.current = 'stopping';
    clearTimeout(this.timer);
    clearImmediate(this.immediate);
    this.stopController.abort();
    const { shutdownGraceMs } = this.options;
    const startedAt = Date.now();
    const grace = setTimeout(
      () => this.abandonController.abort(new Error('abandoned at shutdown')),
      shutdownGraceMs,
    );
    // Past the grace, settles and the listener's goodbye get SHUTDOWN_MARGIN_MS more; after
    // that shutdown returns whatever the database does, and statements still waiting are given
    // up (their rows keep the lease and are claimed again when it ends).
    const deadline = delay(shutdownGraceMs + SHUTDOWN_MARGIN_MS);
    try {
      await Promise.race([this.settleInFlight(), deadline.promise]);
    } finally {
      clearTimeout(grace);
      const left = shutdownGraceMs + SHUTDOWN_MARGIN_MS - (Date.now() - startedAt);
      await Promise.race([this.listener?.stop(left), deadline.promise]);
      deadline.cancel();
      this.repository.abandonInFlight();
      this.current = 'stopped';
    }
  }

  private async settleInFlight(): Promise<void> {
    await this.draining;
    await Promise.all(this.settling);
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    clearImmediate(this.immediate);
    // setTimeout(0) waits at least a millisecond; a wake should cost less than that.
    if (delayMs === 0) this.immediate = setImmediate(() => this.tick());
    else this.timer = setTimeout(() => this.tick(), delayMs);
  }

  private tick(): void {
    if (this.current !== 'running' || this.draining) return;
    this.wokenWhileDraining = false;
    this.draining = this.drainAndPlan()
      .catch((err: unknown) => {
        // The relay reports store failures as results; anything else is a bug worth seeing,
        // and the loop keeps going.
        this.logger.error(`Outbox drain crashed: ${scrubError(err)}`);
        this.plan(this.options.failedDrainRetryMs);
      })
      .finally(() => {
        this.draining = undefined;
        // A wake that landed after the next delay was planned must not wait for that delay.
        if (this.wokenWhileDraining) this.plan(0);
      });
  }

  private async drainAndPlan(): Promise<void> {
    const batch = await this.relay.claimAndDeliver({
      stop: this.stopController.signal,
      abandon: this.abandonController.signal,
    });
    if (!batch.ok) {
      this.logger.warn(`Outbox drain failed: ${batch.error?.message}`);
      return this.plan(this.options.failedDrainRetryMs);
    }
    this.lastDrain = new Date();
    if (batch.records.length > 0) await this.settleInBackground(batch);
    if (this.wokenWhileDraining || batch.records.length >= batch.limit) return this.plan(0);
    // A stopping dispatcher plans nothing, so shutdown waits on no further query.
    if (this.current !== 'running') return;
    this.plan(await this.nextDelay());
  }

  /**
   * Settles a batch while the next claim goes ahead: its rows stay leased until then, so
   * nobody else takes them, and the next events need not wait for this commit. At most
   * MAX_SETTLING batches are in flight.
   */
  private async settleInBackground(batch: DeliveredBatch): Promise<void> {
    const settling: Promise<void> = this.relay
      .settle(batch)
      .then(
        // A failed event may be due again before the delay planned while it was settling.
        (report) => (report.failed > 0 ? this.wake() : undefined),
        (err: unknown) => this.logger.error(`Outbox settle crashed: ${scrubError(err)}`),
      )
      .finally(() => this.settling.delete(settling));
    this.settling.add(settling);
    if (this.settling.size >= MAX_SETTLING) await Promise.race(this.settling);
  }

  /** Sleep until the next row is due: never less than the idle floor, never more than the poll. */
  private async nextDelay(): Promise<number> {
    const { pollIntervalMs, idleFloorMs, deadRetryMs, types } = this.options;
    const pending = await this.repository.pendingState({ deadRetryMs, types });
    if (this.wokenWhileDraining) return 0;
    if (!pending.ok) return this.options.failedDrainRetryMs;
    const due = pending.value.nextDueInMs ?? pollIntervalMs;
    return Math.min(pollIntervalMs, Math.max(idleFloorMs, due));
  }

  private plan(delayMs: number): void {
    if (this.current === 'running') this.schedule(delayMs);
  }

  /**
   * The outbox bounds its own statements, but a new pool connection to a database that stopped
   * answering waits as long as the driver lets it: without a connect timeout, forever, and
   * closing the DataSource at shutdown waits for it too.
   */
  private warnWithoutConnectTimeout(): void {
    const options = this.dataSource.options as {
      connectTimeoutMS?: number;
      extra?: { connectionTimeoutMillis?: number };
    };
    if (options.connectTimeoutMS || options.extra?.connectionTimeoutMillis) return;
    this.logger.warn(
      'The DataSource sets no connect timeout: a new connection to a database that stops ' +
        'answering waits forever, and so does closing the app. Set connectTimeoutMS ' +
        '(for example 5000) in the TypeORM options.',
    );
  }

  private listenerClient(): ClientConfig {
    return listenerClientConfig(this.dataSource, this.options.listen.connectionString);
  }
}
