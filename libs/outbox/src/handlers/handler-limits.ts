import { randomUUID } from 'node:crypto';
import { Injectable, Logger, Optional } from '@nestjs/common';
import { HandlerLimitStore } from '../store/limits/handler-limit.store';
import { OutboxTelemetry } from '../telemetry/outbox.telemetry';
import { LEASE_SETTLE_HEADROOM_MS } from '../outbox.options';
import { RateLimitedLog } from '../common/rate-limited-log.util';
import { OutboxMessages } from '../outbox.messages';
import type { HandlerOutcome } from './outbox-handler.types';
import type { RegisteredHandler } from './registered-handler';

/** What PostgreSQL says when the limits' migration has not run. */
const UNDEFINED_TABLE = '42P01';
const UNDEFINED_FUNCTION = '42883';
/** A handler's mean run time before its first run is measured. */
const FIRST_MEAN_MS = 100;
/** The weight of each new run time in the mean. */
const MEAN_WEIGHT = 0.2;

/**
 * A run of a limited handler that did not start: its limit had no room. `heldUntil` is when to
 * try again (database clock), or null when the limit could not be asked (the database failed).
 */
export interface HeldByLimit {
  handlerName: string;
  ok: false;
  heldUntil: Date | null;
}

/** What a run of a handler came to: its handler's outcome, or held back by its limit. */
export type RunOutcome = HandlerOutcome | HeldByLimit;

export function isHeld(outcome: RunOutcome): outcome is HeldByLimit {
  return 'heldUntil' in outcome;
}

/**
 * Go: `release` once the run has returned (`ran` false: it never started after all). Or not
 * now: `held`.
 */
export type LimitAnswer =
  { admitted: true; release(ran: boolean): void } | { admitted: false; held: HeldByLimit };

/**
 * Admits runs of limited handlers (`maxConcurrent`, `rate`) against the limit's row, shared by
 * every process on the database (see `outbox_limit_admit_v1`): one statement before such a run,
 * one after it when it held a place in flight. Handlers without a limit never come here.
 */
@Injectable()
export class HandlerLimits {
  private readonly logger = new Logger('Outbox');
  private readonly failureLog = new RateLimitedLog((line) => this.logger.warn(line));
  /** Each limited handler's mean run time in this process, which spaces its held runs. */
  private readonly meanMs = new Map<string, number>();
  /** Runs each handler had held back in this process since it started. */
  private readonly heldRuns = new Map<string, number>();

  constructor(
    private readonly store: HandlerLimitStore,
    @Optional() private readonly telemetry: OutboxTelemetry = new OutboxTelemetry(),
  ) {}

  /** Runs held back so far, by limited handler that has had an event here: for the health details. */
  held(): Record<string, number> {
    return Object.fromEntries(this.heldRuns);
  }

  /** Asks `handler`'s limit (it has one) for a run on event `eventId`. */
  async admit(handler: RegisteredHandler, eventId: string): Promise<LimitAnswer> {
    const limit = handler.limit!;
    if (!this.heldRuns.has(handler.name)) this.heldRuns.set(handler.name, 0);
    const token = randomUUID();
    const meanMs = this.meanMs.get(handler.name) ?? FIRST_MEAN_MS;
    // A place in flight frees about every run's time ÷ places; the rate's own spacing is the
    // database's to add (see `outbox_limit_admit_v1`).
    const spacingMs = Math.max(limit.maxConcurrent ? meanMs / limit.maxConcurrent : 0, 1);
    const answer = await this.store.admit({
      handler: handler.name,
      eventId,
      perPartition: limit.perPartition,
      token,
      holdMs: handler.budgetMs + LEASE_SETTLE_HEADROOM_MS,
      maxConcurrent: limit.maxConcurrent,
      rate: limit.rate,
      spacingMs,
    });
    if (!answer.ok) {
      const { code, message } = answer.error;
      const missing = code === UNDEFINED_TABLE || code === UNDEFINED_FUNCTION;
      this.failureLog.log(OutboxMessages.limitUnasked(handler.name, message, missing));
      return this.unasked(handler.name);
    }
    if (!answer.value.admitted) return this.refused(handler.name, answer.value.retryAt);
    const startedAt = performance.now();
    return {
      admitted: true,
      release: (ran) => {
        if (ran) {
          const mean = this.meanMs.get(handler.name) ?? FIRST_MEAN_MS;
          const ranMs = performance.now() - startedAt;
          this.meanMs.set(handler.name, mean + MEAN_WEIGHT * (ranMs - mean));
        }
        // A release that fails leaves the place taken until its hold runs out (the budget).
        if (limit.maxConcurrent !== null) {
          void this.store.release(handler.name, answer.value.partition, token);
        }
      },
    };
  }

  /** A run whose limit could not be asked (the database failed): held, to ask again soon. */
  unasked(handlerName: string): Extract<LimitAnswer, { admitted: false }> {
    return this.refused(handlerName, null);
  }

  /**
   * An admitted run that can no longer start under its claim's lease (the admission took too
   * long): held back, to come back a moment later.
   */
  late(handlerName: string): HeldByLimit {
    return this.refused(handlerName, null).held;
  }

  private refused(
    handlerName: string,
    heldUntil: Date | null,
  ): Extract<LimitAnswer, { admitted: false }> {
    this.heldRuns.set(handlerName, (this.heldRuns.get(handlerName) ?? 0) + 1);
    this.telemetry.handlerHeld(handlerName);
    return { admitted: false, held: { handlerName, ok: false, heldUntil } };
  }
}
