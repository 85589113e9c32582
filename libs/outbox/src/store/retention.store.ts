import { ok, type OutboxResult } from './outbox.result';
import { ClientStore } from './store.client';
import {
  FORGET_DONE_KEYS,
  FORGET_IDLE_WAITS,
  RECOUNT_WAITS,
  WAKE_STRANDED,
} from './ordering/ordering.sql';

/** One batch of `WAKE_STRANDED`. */
interface StrandedBatch {
  scanned: number;
  last_id: string | null;
  woken: number;
  handlers: string[];
  keys: string[];
}

export interface SweepOptions {
  /** Delivered rows older than this are deleted. */
  retentionMs: number;
  /** Rows per delete statement; small batches keep locks and WAL bursts short. */
  batchSize: number;
  /** Stop after this many batches in one sweep (unbounded when absent). */
  maxBatches?: number;
  /** Stop between batches once aborted (shutdown). */
  signal?: AbortSignal;
}

/**
 * Deletes one batch of rows whose `kept since` column is older than the retention, oldest first;
 * rows locked by anyone are skipped rather than waited for.
 * $1 retention ms, $2 batch size.
 */
function sweepBatch(keptSince: string, undelivered: boolean): string {
  return `
  WITH expired AS (
    SELECT id
    FROM outbox_event
    WHERE ${undelivered ? 'dispatched_at IS NULL AND ' : ''}${keptSince} < now() - make_interval(secs => $1 / 1000.0)
    ORDER BY ${keptSince}
    LIMIT $2
    FOR UPDATE SKIP LOCKED
  ),
  deleted AS (
    DELETE FROM outbox_event AS e
    USING expired
    WHERE e.id = expired.id
    RETURNING 1
  )
  SELECT count(*)::int AS deleted FROM deleted
`;
}

/** Delivered rows past the retention. Live and dead rows are never candidates. */
const SWEEP_BATCH = sweepBatch('dispatched_at', false);

/** Discarded rows past their retention (`retention.discardedRetentionMs`). */
const SWEEP_DISCARDED_BATCH = sweepBatch('discarded_at', true);

/** The retention store (`OutboxRetentionSweeper`'s): deletes what was kept long enough. */
export class RetentionStore extends ClientStore {
  /**
   * Deletes delivered rows older than the retention, one short batch per statement, until a
   * batch comes back short (or `maxBatches` is reached). Returns how many rows were deleted.
   */
  async sweep(options: SweepOptions): Promise<OutboxResult<number>> {
    return this.sweepWith('sweep', SWEEP_BATCH, options);
  }

  /**
   * Deletes discarded rows kept longer than `retentionMs`, in batches as `sweep` does. Returns
   * how many rows were deleted.
   */
  async sweepDiscarded(options: SweepOptions): Promise<OutboxResult<number>> {
    return this.sweepWith('sweepDiscarded', SWEEP_DISCARDED_BATCH, options);
  }

  /**
   * Wakes parked events no earlier event of their key holds (see `WAKE_STRANDED`), reading every
   * parked event once, `batchSize` a statement, and recounts the wait rows of their keys. Returns
   * how many it woke.
   */
  async wakeStranded(options: Omit<SweepOptions, 'retentionMs'>): Promise<OutboxResult<number>> {
    let after: string | null = null;
    let woken = 0;
    for (let batch = 0; !options.signal?.aborted; batch++) {
      if (batch >= (options.maxBatches ?? Infinity)) break;
      const result: OutboxResult<StrandedBatch> = await this.client.run(
        'wakeStranded',
        WAKE_STRANDED,
        [after, options.batchSize, this.client.channel],
        ([row]: StrandedBatch[]) => row,
      );
      if (!result.ok) return result;
      const { scanned, handlers, keys }: StrandedBatch = result.value;
      if (handlers.length > 0) {
        const recount = await this.client.run(
          'recountWaits',
          RECOUNT_WAITS,
          [handlers, keys],
          () => undefined,
        );
        if (!recount.ok) return recount;
      }
      woken += result.value.woken;
      after = result.value.last_id;
      if (scanned < options.batchSize) break;
    }
    return ok(woken);
  }

  /**
   * Forgets the ordering bookkeeping of keys with nothing left to do (see `FORGET_DONE_KEYS` and
   * `FORGET_IDLE_WAITS`), reading every key and wait row once, `batchSize` a statement, so the
   * two tables hold the keys in use rather than every key ever used.
   */
  async forgetDoneKeys(options: Omit<SweepOptions, 'retentionMs'>): Promise<OutboxResult<void>> {
    for (const [operation, statement] of [
      ['forgetDoneKeys', FORGET_DONE_KEYS],
      ['forgetIdleWaits', FORGET_IDLE_WAITS],
    ] as const) {
      let after: unknown = null;
      for (let batch = 0; !options.signal?.aborted; batch++) {
        if (batch >= (options.maxBatches ?? Infinity)) break;
        const result: OutboxResult<{ scanned: number; last: unknown }> = await this.client.run(
          operation,
          statement,
          [after, options.batchSize],
          ([row]: { scanned: number; last: unknown }[]) => row,
        );
        if (!result.ok) return result;
        after = result.value.last;
        if (result.value.scanned < options.batchSize) break;
      }
    }
    return ok(undefined);
  }

  private async sweepWith(
    operation: string,
    statement: string,
    options: SweepOptions,
  ): Promise<OutboxResult<number>> {
    let total = 0;
    for (
      let batch = 0;
      batch < (options.maxBatches ?? Infinity) && !options.signal?.aborted;
      batch++
    ) {
      const result = await this.client.run(
        operation,
        statement,
        [options.retentionMs, options.batchSize],
        ([row]: { deleted: number }[]) => row.deleted,
      );
      if (!result.ok) return result;
      total += result.value;
      if (result.value < options.batchSize) break;
    }
    return ok(total);
  }
}
