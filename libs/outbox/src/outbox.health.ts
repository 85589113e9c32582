import { Inject, Injectable, Optional } from '@nestjs/common';
import { HandlerLimits } from './handlers/handler-limits';
import { OutboxEngine, type OutboxEngineState, type OutboxSlots } from './engine/outbox.engine';
import type { PgListenerState } from './engine/pg-listener.types';
import type { OutboxHorizon, PendingState } from './store/lease/lease.types';
import type { ResolvedOutboxOptions } from './outbox.options';
import { OutboxLeaseStore } from './store/lease/lease.store';
import { OUTBOX_OPTIONS } from './outbox.tokens';
import { scrubError } from './common/scrub-error.util';
import { indicatorResult } from './common/indicator-result.util';

export interface OutboxHealthOptions {
  /**
   * Down when the oldest due event has waited longer than this. Lag is queue-wide: every pod
   * sees the same figure, so leave it unset on a readiness probe (a backlog would take every pod
   * out of rotation at once) and use it where a queue-wide alarm belongs, such as a worker-only
   * deployment's probe or an alert.
   */
  maxLagMs?: number;
  /** Bound on the state query; a slower database reports down instead of hanging the probe. */
  timeoutMs?: number;
}

/**
 * What the indicator reports under its key. The figures are missing when the state query
 * failed; `message` says why the status is down.
 */
export type OutboxHealthData = {
  status: 'up' | 'down';
  /** This pod's engine. */
  state: OutboxEngineState;
  listener: PgListenerState | 'disabled';
  /** When this pod's last claim completed (ISO time), or null. */
  lastDrainAt: string | null;
  /** How long the oldest due event has waited, in ms (0 when none is due). */
  lagMs?: number;
  due?: number;
  retrying?: number;
  inFlight?: number;
  expiredLeases?: number;
  /** Events waiting for an earlier event of their key (ordered handlers). */
  parked?: number;
  dead?: number;
  /** Keys an ordered handler cannot go on with: their head is dead (see `OutboxAdmin.blockedKeys`). */
  blockedKeys?: number;
  /**
   * How long the oldest event holding its key for an ordered handler that retries it has waited
   * since it was emitted, in ms (null when none): the events of its key wait behind it.
   */
  orderedWaitMs?: number | null;
  /** Each count stops there: a count equal to it means at least that many. */
  countLimit?: number | null;
  /**
   * The xmin horizon on the outbox's database: how long its oldest holder has been open (ms, or
   * null) and the outbox table's dead tuples. Not a reason for down: see `OutboxHorizon`.
   */
  horizon?: OutboxHorizon;
  slots?: OutboxSlots;
  /** While settle statements fail: since when, and how many settles were given up. */
  settleFailure?: { since: string; lost: number } | null;
  /**
   * Runs of each limited handler (`maxConcurrent`, `rate`) this pod held back by its limit since
   * it started: they did not start, and their events wait for room. Only handlers with a limit
   * that had an event here. Not a reason for down.
   */
  heldByLimit?: Record<string, number>;
  message?: string;
};

/**
 * What `isHealthy` returns: the shape `@nestjs/terminus` expects of an indicator (its
 * `HealthIndicatorResult`), declared here so the outbox needs Terminus only where the app uses it.
 */
export type OutboxHealthResult<Key extends string = 'outbox'> = Record<Key, OutboxHealthData>;

/** Poll intervals without a completed claim after which a running engine counts as stuck. */
export const STALE_AFTER_POLLS = 3;
const DEFAULT_TIMEOUT_MS = 2000;

/**
 * Terminus indicator for readiness during rollouts. Down for what is true of this pod: its
 * engine stops or has stopped, has completed no claim for several poll intervals, gave up
 * settles that the store kept refusing, or its state query fails; and, only when `maxLagMs` is
 * given, for a queue-wide lag. It never throws; the data says why: lag, the due / retrying /
 * in-flight / expired-lease / parked / dead / blocked-key counts (each read from an index and capped at `countLimit`,
 * so a probe costs the same at any backlog: a count equal to it means at least that many), and
 * this pod's slots (busy, and overdue: held by a handler past its budget).
 */
@Injectable()
export class OutboxHealthIndicator {
  constructor(
    private readonly engine: OutboxEngine,
    private readonly repository: OutboxLeaseStore,
    @Inject(OUTBOX_OPTIONS) private readonly options: ResolvedOutboxOptions,
    @Optional() private readonly limits?: HandlerLimits,
  ) {}

  async isHealthy<const Key extends string = 'outbox'>(
    key: Key = 'outbox' as Key,
    { maxLagMs, timeoutMs = DEFAULT_TIMEOUT_MS }: OutboxHealthOptions = {},
  ): Promise<OutboxHealthResult<Key>> {
    const session = indicatorResult<Key, Omit<OutboxHealthData, 'status'>>(key);
    const pending = await this.pendingWithin(timeoutMs);
    // Read once the query is back, not before it: a shutdown that began while it was out must
    // make this answer down, or a pod already stopping could still report ready.
    const state = this.engine.state;
    const lastDrainAt = this.engine.lastDrainAt;
    const base = {
      state,
      listener: this.engine.listenerState,
      lastDrainAt: lastDrainAt?.toISOString() ?? null,
    };
    if (!pending.ok) return session.down({ ...base, message: pending.message });
    // Every figure of the state but the next due time, which is the engine's business.
    const { oldestDueWaitMs, nextDueInMs, ...counts } = pending.value;
    const settleFailure = this.engine.settleFailure;
    const data = {
      ...base,
      lagMs: oldestDueWaitMs ?? 0,
      ...counts,
      slots: this.engine.slots,
      settleFailure: settleFailure && {
        since: settleFailure.since.toISOString(),
        lost: settleFailure.lost,
      },
      ...this.heldByLimit(),
    };
    if (state === 'stopping' || state === 'stopped') {
      return session.down({ ...data, message: `dispatcher is ${state}` });
    }
    if (settleFailure && settleFailure.lost > 0) {
      return session.down({
        ...data,
        message:
          `settles failing since ${settleFailure.since.toISOString()} ` +
          `(${settleFailure.lost} given up; claiming pauses after each): ${settleFailure.message}`,
      });
    }
    if (maxLagMs !== undefined && data.lagMs > maxLagMs) {
      return session.down({
        ...data,
        message: `oldest due event waited ${data.lagMs} ms (max ${maxLagMs} ms)`,
      });
    }
    // Every slot may be busy for up to a lease, so a pause in claims that long is not yet a stuck one.
    const staleAfterMs =
      STALE_AFTER_POLLS * this.options.tuning.pollIntervalMs + this.options.leaseMs;
    const lastProgress = lastDrainAt ?? this.engine.runningSince;
    const sinceDrain = lastProgress ? Date.now() - lastProgress.getTime() : 0;
    if (state === 'running' && sinceDrain > staleAfterMs) {
      return session.down({ ...data, message: `no claim completed for ${sinceDrain} ms` });
    }
    return session.up(data);
  }

  private heldByLimit(): { heldByLimit?: Record<string, number> } {
    const held = this.limits?.held();
    return held && Object.keys(held).length > 0 ? { heldByLimit: held } : {};
  }

  private async pendingWithin(
    timeoutMs: number,
  ): Promise<{ ok: true; value: PendingState } | { ok: false; message: string }> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<{ ok: false; message: string }>((resolve) => {
      timer = setTimeout(
        () => resolve({ ok: false, message: `outbox state query timed out after ${timeoutMs} ms` }),
        timeoutMs,
      );
    });
    const query = this.repository
      .pendingState({ types: this.options.types, dueFrom: this.engine.claimsFrom })
      .then((result) =>
        result.ok
          ? { ok: true as const, value: result.value }
          : { ok: false as const, message: result.error.message },
      )
      .catch((err: unknown) => ({ ok: false as const, message: scrubError(err) }));
    try {
      return await Promise.race([query, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}
