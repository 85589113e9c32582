import { performance } from 'node:perf_hooks';
import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { OutboxEngine, type OutboxEngineState, type OutboxSlots } from './engine/outbox.engine';
import type { ResolvedOutboxOptions } from './outbox.options';
import { OutboxLeaseStore } from './store/lease/lease.store';
import { OUTBOX_OPTIONS } from './outbox.tokens';
import { EventLoopStalls } from './common/event-loop-stalls.util';
import { indicatorResult } from './common/indicator-result.util';

/**
 * Time a claim may stay out past the longest the store lets it take before the engine counts as
 * wedged: room for timers that fire a little late on a loaded machine.
 */
export const CLAIM_WEDGED_MARGIN_MS = 2000;

/**
 * What the liveness indicator reports under its key: figures of this process only, never of the
 * database or the queue. `message` says why the status is down.
 */
export type OutboxLivenessData = {
  status: 'up' | 'down';
  /** This pod's engine; the engine is judged only while it is `running`. */
  state: OutboxEngineState;
  /** The longest the event loop stalled within the last `liveness.eventLoopWindowMs`, in ms. */
  eventLoopStallMs: number;
  /** How long the loop's oldest claim still out has waited for its answer, in ms (null: none). */
  claimOutMs: number | null;
  slots: OutboxSlots;
  /** How long every slot has been held by a handler past its budget, in ms (null: not so). */
  slotsOverdueMs: number | null;
  message?: string;
};

/** What `isAlive` returns: the shape `@nestjs/terminus` expects of an indicator. */
export type OutboxLivenessResult<Key extends string = 'outbox'> = Record<Key, OutboxLivenessData>;

/**
 * Terminus indicator for liveness: down only when this process cannot make progress, which a
 * restart mends. That is an event loop that stalled past `liveness.eventLoopStallMs`, or, while
 * the engine runs, an engine that is wedged: a claim of its loop out longer than the store
 * lets any claim take (`OutboxLeaseStore.longestClaimMs` plus `CLAIM_WEDGED_MARGIN_MS`), or
 * every slot held for `liveness.overdueSlotsMs` by handlers past their budget that ignore their
 * AbortSignal.
 *
 * Never the database being away or slow: a restart would not bring it back, and would turn an
 * outage into a crash loop. Every statement of the engine is bounded, so with the database away
 * claims fail in time, and a claim that failed is progress (the loop ran); readiness
 * (`OutboxHealthIndicator`) is what reports the database. An engine that is not running (not
 * started on an API pod, or stopping at shutdown) is no wedge either: shutdown is readiness's to
 * report, and the process must be left to finish it. It reads only this process's state, never
 * throws, and reports figures, never an event or an option.
 *
 * The event loop is measured from the first `isAlive` (see `EventLoopStalls`), so an app that
 * never asks pays no timer.
 */
@Injectable()
export class OutboxLivenessIndicator implements OnApplicationShutdown {
  private readonly stalls: EventLoopStalls;

  constructor(
    private readonly engine: OutboxEngine,
    private readonly repository: OutboxLeaseStore,
    @Inject(OUTBOX_OPTIONS) private readonly options: ResolvedOutboxOptions,
  ) {
    this.stalls = new EventLoopStalls(options.liveness.eventLoopWindowMs);
  }

  isAlive<const Key extends string = 'outbox'>(
    key: Key = 'outbox' as Key,
  ): OutboxLivenessResult<Key> {
    this.stalls.start();
    const result = indicatorResult<Key, Omit<OutboxLivenessData, 'status'>>(key);
    const {
      eventLoopStallMs: stallBound,
      eventLoopWindowMs,
      overdueSlotsMs,
    } = this.options.liveness;
    const state = this.engine.state;
    // The engine's times are on the monotonic clock: a wall clock stepped by NTP is no wedge.
    const now = performance.now();
    // Only a running engine is judged: a stopping one is shutdown's to finish (readiness reports
    // it), and an idle or stopped one has no loop that could wedge.
    const progress = state === 'running' ? this.engine.progress : null;
    const sinceOr = (at: number | null | undefined) => (at == null ? null : Math.max(0, now - at));
    const data = {
      state,
      eventLoopStallMs: this.stalls.worstMs(),
      claimOutMs: sinceOr(progress?.oldestClaimSentAt),
      slots: this.engine.slots,
      slotsOverdueMs: sinceOr(progress?.allSlotsOverdueSince),
    };
    if (data.eventLoopStallMs > stallBound) {
      return result.down({
        ...data,
        message:
          `the event loop stalled for ${data.eventLoopStallMs} ms within the last ` +
          `${eventLoopWindowMs} ms (max ${stallBound} ms)`,
      });
    }
    const claimBound = this.repository.longestClaimMs + CLAIM_WEDGED_MARGIN_MS;
    if (data.claimOutMs !== null && data.claimOutMs > claimBound) {
      return result.down({
        ...data,
        message:
          `a claim has waited ${data.claimOutMs} ms for its answer, past the ${claimBound} ms ` +
          `any claim may take: the engine is wedged`,
      });
    }
    if (data.slotsOverdueMs !== null && data.slotsOverdueMs > overdueSlotsMs) {
      return result.down({
        ...data,
        message:
          `every slot (${data.slots.size}) has been held by a handler past its budget for ` +
          `${data.slotsOverdueMs} ms (max ${overdueSlotsMs} ms): nothing can run here`,
      });
    }
    return result.up(data);
  }

  onApplicationShutdown(): void {
    this.stalls.stop();
  }
}
