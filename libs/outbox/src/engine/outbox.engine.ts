import {
  Inject,
  Injectable,
  Logger,
  Optional,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { setMaxListeners } from 'node:events';
import type { ClientConfig } from 'pg';
import type { DataSource } from 'typeorm';
import { EventDispatcher } from '../handlers/event.dispatcher';
import { HandlerRunner } from '../handlers/handler.runner';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { OutboxCompleter, type SettleFailure } from './outbox.completer';
import { completerOptions, type CompleterOptions } from './settle-statements';
import { catchUpDeadSchedule } from './dead-schedule.catch-up';
import { OutboxExecutor } from './outbox.executor';
import { OutboxProducer } from './outbox.producer';
import { tally, type DrainReport } from './drain-report';
import { DatabaseReturn } from './database-return';
import { producerOptions, type ProducerMode } from './producer.types';
import { InstanceReportStore } from '../store/instance-report.store';
import { OutboxLeaseStore } from '../store/lease/lease.store';
import { dueFromPayload } from '../store/wake-payload.sql';
import { distrustPoolConnections } from '../store/bounded-statement.util';
import { OUTBOX_DATA_SOURCE, OUTBOX_OPTIONS } from '../outbox.tokens';
import { PgListener } from './pg.listener';
import type { PgListenerState } from './pg-listener.types';
import { listenerClientConfig } from './listener-client.config';
import { connectTimeoutWarning } from './connect-timeout.warning';
import { delay } from '../common/delay.util';
import { OutboxTelemetry } from '../telemetry/outbox.telemetry';
import { OutboxHeartbeat } from './outbox.heartbeat';
import { RateLimitedLog } from '../common/rate-limited-log.util';
import { scrubError } from '../common/scrub-error.util';

export type { DrainReport } from './drain-report';

/** This instance's slots: how many events run, and how many of them are past their budget. */
export interface OutboxSlots {
  size: number;
  busy: number;
  /** Events with a handler past its budget that has not returned; each keeps its slot. */
  overdue: number;
}

/** What liveness reads of the engine's progress (`performance.now()` times, a clock NTP never steps; null: nothing of the kind). */
export interface EngineProgress {
  /** When the loop's oldest claim still waiting for its answer was sent. */
  oldestClaimSentAt: number | null;
  /** Since when every slot has been held by a handler past its budget. */
  allSlotsOverdueSince: number | null;
  /** Whether the loop claims now, and if not why: see `ProducerMode`. */
  claiming: ProducerMode;
}

/**
 * How long the engine's shutdown goes on past `shutdownGraceMs` at most: time for the last
 * settles and the listener's goodbye. Its stop returns within the grace plus this, whatever the
 * database does, and leaves no pool connection checked out.
 */
export const SHUTDOWN_MARGIN_MS = 1000;

export type OutboxEngineState = 'idle' | 'running' | 'stopping' | 'stopped';

/**
 * The outbox's engine for this instance, and its lifecycle: a producer claims due events into
 * free slots, an executor runs each one's handlers at once, a completer batches the settles
 * (see `OutboxProducer`, `OutboxExecutor`, `OutboxCompleter`). It starts at application
 * bootstrap (unless `autoStart` is off) with its LISTEN connection, and stops within the
 * shutdown grace.
 */
@Injectable()
export class OutboxEngine
  implements OnApplicationBootstrap, OnModuleDestroy, BeforeApplicationShutdown
{
  private readonly logger = new Logger('Outbox');
  /** A flapping network reconnects often; the log says so without flooding. */
  private readonly reconnectLog = new RateLimitedLog((line) => this.logger.log(line), 5, 60_000);
  private current: OutboxEngineState = 'idle';
  private abandonController = new AbortController();
  private listener: PgListener | undefined;
  private stopping: Promise<void> | undefined;
  private startedAt: Date | null = null;
  private readonly completer: OutboxCompleter;
  private readonly completerOptions: CompleterOptions;
  private readonly executor: OutboxExecutor;
  private readonly producer: OutboxProducer;
  private readonly heartbeat: OutboxHeartbeat;

  constructor(
    registry: EventDispatcher,
    runner: HandlerRunner,
    private readonly repository: OutboxLeaseStore,
    private readonly reports: InstanceReportStore,
    @Inject(OUTBOX_OPTIONS) private readonly options: ResolvedOutboxOptions,
    @Inject(OUTBOX_DATA_SOURCE) private readonly dataSource: DataSource,
    @Optional() private readonly telemetry: OutboxTelemetry = new OutboxTelemetry(),
  ) {
    this.completerOptions = completerOptions(options, () => registry.orderedSettles());
    this.completer = new OutboxCompleter(repository, this.completerOptions, {
      onSettled: () => this.producer.pump(),
      onGiveUp: () => this.producer.pause(),
      onRetryScheduled: (delayMs, retryFrom) => {
        if (retryFrom !== null) this.producer.retryFrom(retryFrom);
        this.producer.wakeIn(delayMs);
      },
      onStatement: (kind, ms, ok) => this.telemetry.settled(kind, ms, ok),
      onDead: (types) => this.telemetry.dead(types),
      onStoreFailure: (error) => databaseReturn.statementFailed(error),
    });
    const databaseReturn = new DatabaseReturn(
      this.completer,
      () => this.listener,
      (line) => this.logger.warn(line),
    );
    this.executor = new OutboxExecutor(registry, runner, this.completer, (heldMs) =>
      this.producer.slotFreed(heldMs),
    );
    this.producer = new OutboxProducer(
      repository,
      this.executor,
      this.completer,
      producerOptions(options, () => registry.orderedSettles()?.skipDead),
      {
        claimed: (n) => this.telemetry.claimed(n),
        claimFailed: (error) => databaseReturn.claimFailed(error),
        answeredAgain: () => void databaseReturn.answeredAgain(),
      },
    );
    // The state gauges read what the health probe reads, from where this instance claims.
    this.telemetry.observeStateFrom(() =>
      repository.pendingState({ types: options.types, dueFrom: this.claimsFrom }),
    );
    this.heartbeat = new OutboxHeartbeat(
      reports,
      () => ({
        state: this.current,
        listener: this.listenerState,
        types: options.types ?? null,
        concurrency: options.concurrency,
        inFlight: this.executor.inFlight,
        startedAt: this.startedAt ?? new Date(),
        lastClaimAt: this.producer.lastClaimAt,
      }),
      (line) => this.logger.warn(line),
    );
  }

  get state(): OutboxEngineState {
    return this.current;
  }

  /** The LISTEN connection's state, or `disabled` when `listen.enabled` is off. */
  get listenerState(): PgListenerState | 'disabled' {
    if (!this.options.listen.enabled) return 'disabled';
    return this.listener?.state ?? 'idle';
  }

  /** When the running engine was started. */
  get runningSince(): Date | null {
    return this.current === 'running' ? this.startedAt : null;
  }

  /**
   * Where this instance's claims start in the due range (epoch ms, database clock); null when it
   * does not run or scans the whole range. State probes start there too.
   */
  get claimsFrom(): number | null {
    return this.current === 'running' ? this.producer.claimsFrom : null;
  }

  /** When the last claim completed without a store failure. */
  get lastDrainAt(): Date | null {
    return this.producer.lastClaimAt;
  }

  /** Slots in use, and how many are held by handlers past their budget. */
  get slots(): OutboxSlots {
    return {
      size: this.options.concurrency,
      busy: this.executor.active,
      overdue: this.executor.overdue,
    };
  }

  /** See `EngineProgress`: what `OutboxLivenessIndicator` judges the engine by. */
  get progress(): EngineProgress {
    const allOverdue = this.executor.overdue >= this.options.concurrency;
    return {
      oldestClaimSentAt: this.producer.oldestClaimSentAt,
      allSlotsOverdueSince: allOverdue ? this.executor.lastOverdueAt : null,
      claiming: this.producer.mode,
    };
  }

  /** Set while settles fail (claiming pauses once one is given up); null otherwise. */
  get settleFailure(): SettleFailure | null {
    return this.completer.failure;
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
    this.stopping = undefined;
    this.startedAt = new Date();
    this.renewAbandon();
    this.completer.open();
    const warning = connectTimeoutWarning(this.dataSource);
    if (warning) this.logger.warn(warning);
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
          onNotify: (payload) => this.wake(dueFromPayload(payload)),
          // Notifications sent while the connection was down are lost: claim to catch up.
          onReconnect: () => {
            this.telemetry.listenerReconnected();
            this.reconnectLog.log('Outbox listener reconnected; claiming what arrived meanwhile');
            this.wake();
          },
          onError: (message) => this.logger.warn(`Outbox listener: ${message}`),
          // Its server is gone or its address moved: so are the pool's connections to it.
          onLost: () => distrustPoolConnections(this.dataSource),
        },
      );
      await this.listener.start();
    }
    this.producer.start(this.abandonController.signal);
    this.heartbeat.start();
    void this.catchUpDeadSchedule();
  }

  /** Dead rows scheduled under an older, longer dead retry come forward to this one's. */
  private async catchUpDeadSchedule(): Promise<void> {
    const { moved, error } = await catchUpDeadSchedule(
      this.repository,
      {
        deadRetryMs: this.completerOptions.deadRetryMs,
        deadRetryByType: this.completerOptions.deadRetryByType,
        types: this.options.types,
      },
      () => this.current === 'running',
      () => this.wake(),
    ).catch((err: unknown) => ({ moved: 0, error: scrubError(err) }));
    if (moved > 0) {
      this.logger.log(
        `Outbox brought ${moved} dead events forward to the current dead retry schedule`,
      );
    }
    if (error && this.current === 'running') {
      this.logger.warn(
        `Outbox could not bring dead events forward to the current schedule: ${error}`,
      );
    }
  }

  /**
   * Halts claiming at once (a claim in flight gives its rows back), waits for running handlers
   * and, once `shutdownGraceMs` is spent, abandons those still running (their events keep the
   * lease and are claimed again when it ends); then writes the last settles.
   */
  async stop(): Promise<void> {
    if (this.current === 'idle' || this.current === 'stopped') {
      this.current = 'stopped';
      return;
    }
    this.stopping ??= this.halt();
    return this.stopping;
  }

  /**
   * Claims once (up to the free slots, at most `batchSize`), runs what it claimed and writes
   * the settles, outside the loop: for tests, scripts and hand-driven workers (normally with
   * `autoStart: false`). A shutdown abandons its handlers like the loop's.
   */
  async drainOnce(): Promise<DrainReport> {
    const report: DrainReport = {
      ok: true,
      limit: 0,
      claimed: 0,
      delivered: 0,
      failed: 0,
      dead: 0,
      held: 0,
      stale: 0,
      lost: 0,
    };
    if (this.current === 'stopping') return report;
    // A stopped engine closed its completer and abandoned its handlers; a hand-driven
    // drain after it starts afresh.
    this.completer.open();
    if (this.abandonController.signal.aborted) this.renewAbandon();
    const { limit, result } = await this.producer.claimOnce(this.abandonController.signal);
    report.limit = limit;
    if (!result.ok) return { ...report, ok: false, error: result.error };
    report.claimed = result.value.length;
    for (const execution of await Promise.all(result.value)) tally(report, execution);
    return report;
  }

  private renewAbandon(): void {
    this.abandonController = new AbortController();
    // Every running handler listens to it: as many as concurrency times handlers per event.
    setMaxListeners(0, this.abandonController.signal);
  }

  /**
   * Asks for a claim as soon as a slot is free. `dueFrom` (epoch ms, database clock): the rows
   * that woke it are due from then; without it the claim scans the whole due range.
   */
  wake(dueFrom: number | null = null): void {
    if (this.current === 'running') this.producer.wake(dueFrom);
  }

  private async halt(): Promise<void> {
    this.current = 'stopping';
    this.producer.stop();
    // Leaves the list of instances now, not at the end: on a database that stopped answering,
    // a statement sent last would still be connecting when the DataSource closes, and hold it.
    const leaving = this.heartbeat.stop();
    const { shutdownGraceMs } = this.options;
    const startedAt = Date.now();
    // Past the grace, settles and the listener's goodbye get SHUTDOWN_MARGIN_MS more; after
    // that shutdown returns whatever the database does, and statements still waiting are given
    // up (their rows keep the lease and are claimed again when it ends).
    const deadline = delay(shutdownGraceMs + SHUTDOWN_MARGIN_MS);
    const grace = delay(shutdownGraceMs);
    try {
      await Promise.race([this.executor.whenIdle(), grace.promise]);
      grace.cancel();
      this.abandonController.abort(new Error('abandoned at shutdown'));
      const settled = new AbortController();
      await Promise.race([
        this.producer.claimsSettled().then(() => this.completer.idle(settled.signal)),
        deadline.promise,
      ]);
      settled.abort();
    } finally {
      grace.cancel();
      this.completer.close();
      const left = shutdownGraceMs + SHUTDOWN_MARGIN_MS - (Date.now() - startedAt);
      await Promise.race([this.listener?.stop(left), deadline.promise]);
      await Promise.race([leaving, deadline.promise]);
      deadline.cancel();
      this.repository.abandonInFlight();
      this.reports.abandonInFlight();
      this.current = 'stopped';
    }
  }

  private listenerClient(): ClientConfig {
    return listenerClientConfig(this.dataSource, this.options.listen.connectionString);
  }
}
