import { Inject, Injectable, Logger } from '@nestjs/common';
import { EventDispatcher } from './event-dispatcher';
import type { OutboxStoreError } from './outbox.errors';
import type { DeliveredSettle, FailedSettle, OutboxRecord } from './outbox-event.types';
import type { HandlerOutcome, OutboxEvent } from './outbox-handler.types';
import { claimLimit, type ResolvedOutboxOptions } from './outbox.options';
import { OutboxRepository } from './outbox.repository';
import { OUTBOX_OPTIONS } from './outbox.tokens';
import { retryDelayMs } from './retry-backoff';
import { RateLimitedLog } from './rate-limited-log';
import { scrubError } from './scrub-error';

/** Error text in a log line; the whole scrubbed text is in the row's `last_error`. */
const LOGGED_ERROR_LENGTH = 500;

export interface DrainSignals {
  /** Take no further record of the batch; records not started are released. */
  stop?: AbortSignal;
  /** Stop waiting for running handlers; their records keep the lease and are claimed later. */
  abandon?: AbortSignal;
}

/** A claimed batch whose handlers have run (or were abandoned), waiting to be settled. */
export interface DeliveredBatch {
  ok: boolean;
  error?: OutboxStoreError;
  limit: number;
  records: OutboxRecord[];
  outcomes: Array<HandlerOutcome[] | 'unstarted' | 'running'>;
}

/** What one drain did. */
export interface DrainReport {
  ok: boolean;
  /** The claim failed; nothing was delivered. */
  error?: OutboxStoreError;
  limit: number;
  claimed: number;
  delivered: number;
  failed: number;
  /** Records that ran out of attempts in this drain (each announced once). */
  dead: number;
  /** Records given back unstarted because the dispatcher was stopping. */
  released: number;
  /** Records whose handlers were still running when the shutdown grace ran out. */
  abandoned: number;
  /** Settles that found their lease taken by a newer claim (nothing written). */
  stale: number;
}

/**
 * One drain step: claim a batch the lease can cover, deliver each record to the handlers not
 * yet in its `deliveries` (outside any transaction, `concurrency` records at a time), then
 * settle the batch in one statement per outcome.
 */
@Injectable()
export class OutboxRelay {
  private readonly logger = new Logger('Outbox');
  private readonly failureLog = new RateLimitedLog((line) => this.logger.warn(line));
  private readonly deadLog = new RateLimitedLog((line) => this.logger.error(line));
  readonly limit: number;

  constructor(
    private readonly repository: OutboxRepository,
    private readonly dispatcher: EventDispatcher,
    @Inject(OUTBOX_OPTIONS) private readonly options: ResolvedOutboxOptions,
  ) {
    this.limit = claimLimit(options);
  }

  /** Claims, delivers and settles one batch. */
  async drain(signals: DrainSignals = {}): Promise<DrainReport> {
    return this.settle(await this.claimAndDeliver(signals));
  }

  /**
   * The first half of a drain: claim a batch and run its handlers. The records stay leased
   * until `settle`, so a next claim may start before this batch is settled.
   */
  async claimAndDeliver(signals: DrainSignals = {}): Promise<DeliveredBatch> {
    if (signals.stop?.aborted) return { ok: true, limit: this.limit, records: [], outcomes: [] };
    const claim = await this.repository.claim({
      limit: this.limit,
      leaseMs: this.options.leaseMs,
      deadRetryMs: this.options.deadRetryMs,
      types: this.options.types,
    });
    if (!claim.ok) {
      return { ok: false, error: claim.error, limit: this.limit, records: [], outcomes: [] };
    }
    const records = claim.value;
    const outcomes = records.length > 0 ? await this.deliverAll(records, signals) : [];
    return { ok: true, limit: this.limit, records, outcomes };
  }

  /** The second half: one statement per kind of outcome, run side by side. */
  async settle(batch: DeliveredBatch): Promise<DrainReport> {
    const report: DrainReport = {
      ok: batch.ok,
      error: batch.error,
      limit: batch.limit,
      claimed: batch.records.length,
      delivered: 0,
      failed: 0,
      dead: 0,
      released: 0,
      abandoned: 0,
      stale: 0,
    };
    if (batch.records.length === 0) return report;

    const delivered: DeliveredSettle[] = [];
    const failed: FailedSettle[] = [];
    const unstarted: OutboxRecord[] = [];
    batch.records.forEach((record, index) => {
      const result = batch.outcomes[index];
      if (result === 'unstarted') unstarted.push(record);
      else if (result === 'running') report.abandoned++;
      else this.sort(record, result, delivered, failed);
    });
    report.delivered = delivered.length;
    report.failed = failed.length;

    const [deliveredResult, failedResult, releaseResult] = await Promise.all([
      this.repository.markDelivered(delivered),
      this.repository.markFailed(failed, { maxAttempts: this.options.maxAttempts }),
      this.repository.release(unstarted),
    ]);
    for (const result of [deliveredResult, failedResult, releaseResult]) {
      if (result.ok) report.stale += result.value.stale.length;
      // The rows keep their lease and are claimed again when it ends; handlers that succeeded
      // will run again, which their idempotency keys make harmless.
      else this.logger.warn(`Settling a drain failed: ${result.error.message}`);
    }
    if (failedResult.ok) {
      report.dead = failedResult.value.newlyDead.length;
      this.logFailures(batch.records, failed, new Set(failedResult.value.newlyDead));
    }
    if (releaseResult.ok) report.released = releaseResult.value.settled.length;
    return report;
  }

  /** Failed handlers and newly dead events, scrubbed and rate-limited, so operators see them. */
  private logFailures(
    records: readonly OutboxRecord[],
    failed: readonly FailedSettle[],
    newlyDead: ReadonlySet<string>,
  ): void {
    const byId = new Map(records.map((record) => [record.id, record]));
    for (const settle of failed) {
      const record = byId.get(settle.id);
      const what = `${record?.type ?? 'event'} ${settle.id}`;
      const error = scrubError(settle.error, LOGGED_ERROR_LENGTH);
      if (newlyDead.has(settle.id)) {
        this.deadLog.log(
          `Outbox event ${what} is dead after ${settle.attempts} attempts ` +
            `(failed: ${settle.failedHandlers.join(', ')}); ${error}`,
        );
      } else if (record?.deadAt) {
        this.failureLog.log(`Outbox replay of dead event ${what} failed again: ${error}`);
      } else {
        this.failureLog.log(
          `Outbox event ${what} failed attempt ${settle.attempts} of ${this.options.maxAttempts}, ` +
            `next in ${Math.round(settle.retryDelayMs)} ms: ${error}`,
        );
      }
    }
  }

  private async deliverAll(
    records: OutboxRecord[],
    signals: DrainSignals,
  ): Promise<Array<HandlerOutcome[] | 'unstarted' | 'running'>> {
    const outcomes: Array<HandlerOutcome[] | 'unstarted' | 'running'> = records.map(
      () => 'unstarted',
    );
    let next = 0;
    const worker = async () => {
      while (next < records.length && !signals.stop?.aborted && !signals.abandon?.aborted) {
        const index = next++;
        const record = records[index];
        outcomes[index] = 'running';
        outcomes[index] = await this.dispatcher.deliver(toEvent(record), record.deliveries, {
          attempt: record.attempts,
          signal: signals.abandon,
        });
      }
    };
    const workers = Array.from(
      { length: Math.min(this.options.concurrency, records.length) },
      worker,
    );
    const abandoned = whenAborted(signals.abandon);
    try {
      await Promise.race([Promise.all(workers), abandoned.promise]);
    } finally {
      abandoned.dispose();
    }
    // A copy, so handlers finishing after an abandon cannot change what gets settled.
    return [...outcomes];
  }

  private sort(
    record: OutboxRecord,
    outcomes: HandlerOutcome[],
    delivered: DeliveredSettle[],
    failed: FailedSettle[],
  ): void {
    const handlers = outcomes.filter((o) => o.ok).map((o) => o.handlerName);
    const failures = outcomes.filter((o): o is Extract<HandlerOutcome, { ok: false }> => !o.ok);
    if (failures.length === 0) {
      delivered.push({ id: record.id, attempts: record.attempts, handlers });
      return;
    }
    failed.push({
      id: record.id,
      attempts: record.attempts,
      handlers,
      failedHandlers: failures.map((f) => f.handlerName),
      error: failures.map((f) => `${f.handlerName}: ${scrubError(f.error)}`).join('; '),
      retryDelayMs: retryDelayMs(record.attempts, this.options.retry),
    });
  }
}

/** What a handler sees: the record without the lease bookkeeping. */
function toEvent(record: OutboxRecord): OutboxEvent {
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  const { attempts, leaseExpiresAt, deliveries, deadAt, lastError, ...event } = record;
  return event;
}

/** Settles when `signal` aborts; `dispose()` removes its listener once it is no longer needed. */
function whenAborted(signal: AbortSignal | undefined): { promise: Promise<void>; dispose(): void } {
  if (!signal) return { promise: new Promise(() => undefined), dispose: () => undefined };
  let onAbort = (): void => undefined;
  const promise = new Promise<void>((resolve) => {
    onAbort = () => resolve();
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  return { promise, dispose: () => signal.removeEventListener('abort', onAbort) };
}
