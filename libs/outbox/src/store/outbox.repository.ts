import type { DataSource, EntityManager } from 'typeorm';
import type { HandlerFailure } from '../handlers/handler.policy';
import type { OutboxEvent } from '../outbox-event.types';
import { v7 as uuidv7 } from 'uuid';
import {
  DEFAULT_OUTBOX_CHANNEL,
  OUTBOX_EVENT_AGGREGATE,
  OUTBOX_EVENT_DEAD,
  OUTBOX_EVENT_DISCARDED,
  OUTBOX_EVENT_REPLAYED,
} from '../outbox.constants';
import {
  OutboxEventConflictError,
  OutboxStoreError,
  OutboxTransactionRequiredError,
} from '../outbox.errors';
import type {
  ClaimOptions,
  DeliveredSettle,
  EmittedOutboxEvent,
  EnqueuedEvent,
  FailedSettle,
  FailOutcome,
  MarkFailedOptions,
  OutboxEventFilter,
  NewOutboxEvent,
  OutboxRecord,
  PendingState,
  PendingStateOptions,
  SettleOutcome,
  SweepOptions,
  TypeFilterOptions,
} from '../outbox-event.types';
import { toOutboxRow, type OutboxRow } from '../emit/outbox-event.validator';
import {
  encodeCursor,
  toDeadLetter,
  type DeadLetterChangeBatch,
  type DeadLetterFilter,
  type DeadLetterGroup,
  type DeadLetterList,
  type DeadLetterRow,
  type DispatcherReport,
  type OutboxEventDetail,
  type MinuteCount,
  type TypeBacklog,
} from '../admin/dead-letter.types';
import { fail, ok, type OutboxResult } from './outbox.result';
import { scrubError } from '../common/scrub-error.util';
import { hasPoolDriver, runBounded, type StatementBounds } from './bounded-statement.util';
import * as SQL from './outbox.sql';

export interface EnqueueOptions {
  /**
   * Queue a NOTIFY with the events (delivered at COMMIT). Default true; false when the caller
   * coalesces wakes and sends one itself (`wake()`).
   */
  notify?: boolean;
}

export interface OutboxRepositoryOptions {
  /** NOTIFY channel signalled by every enqueue; listeners LISTEN on the same name. */
  channel?: string;
  /** `statement_timeout` of the repository's own statements (not of enqueue). Default 5000. */
  statementTimeoutMs?: number;
  /** `lock_timeout` of the repository's own statements (not of enqueue). Default 2000. */
  lockTimeoutMs?: number;
}

/** A transaction of one backend: its pid, and its start in microseconds (text, exact). */
export interface BackendTransaction {
  pid: number;
  startedUs: string;
}

const DEFAULT_STATEMENT_TIMEOUT_MS = 5000;
const DEFAULT_LOCK_TIMEOUT_MS = 2000;
const DEFAULT_COUNT_LIMIT = 1000;

interface StateRow {
  due: number;
  retrying: number;
  in_flight: number;
  expired_leases: number;
  dead: number;
  next_due_in_ms: number | null;
  oldest_due_wait_ms: number | null;
}

/** The columns of an event as it was emitted. */
interface EventRow {
  id: string;
  type: string;
  aggregate_type: string;
  aggregate_id: string;
  organization_id: string | null;
  request_id: string | null;
  payload: unknown;
  metadata: Record<string, unknown>;
  occurred_at: Date;
  causation_id: string | null;
  correlation_id: string | null;
}

interface ClaimedRow extends EventRow {
  attempts: number;
  lease_expires_at: Date;
  deliveries: Record<string, string>;
  failures: Record<string, HandlerFailure>;
  dead_at: Date | null;
  last_error: string | null;
}

/**
 * The lease repository: the only place that speaks SQL to the outbox table (the statements
 * live in `outbox.sql.ts`). Database failures come back as `{ ok: false, error }` with a
 * scrubbed `OutboxStoreError`; misuse (no transaction, a bad event) throws before any write.
 */
export class OutboxRepository {
  readonly channel: string;
  private readonly bounds: StatementBounds;
  private inFlight = new AbortController();

  constructor(
    private readonly dataSource: DataSource,
    options: OutboxRepositoryOptions = {},
  ) {
    this.channel = options.channel ?? DEFAULT_OUTBOX_CHANNEL;
    this.bounds = {
      statementTimeoutMs: options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS,
      lockTimeoutMs: options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS,
    };
  }

  /**
   * Writes events through the caller's transaction in one statement and queues a NOTIFY on the
   * same connection, so listeners wake only after COMMIT. Returns, in input order, each id and
   * whether it was already present (`duplicate`: the same event emitted again, kept as it was).
   * Throws `OutboxEventConflictError` when an id is present with different content; the caller's
   * transaction should then roll back.
   */
  async enqueue(
    manager: EntityManager,
    events: NewOutboxEvent | readonly NewOutboxEvent[],
    options: EnqueueOptions = {},
  ): Promise<OutboxResult<EnqueuedEvent[]>> {
    if (!manager.queryRunner?.isTransactionActive) {
      throw new OutboxTransactionRequiredError('OutboxRepository.enqueue');
    }
    const rows = (Array.isArray(events) ? events : [events]).map(toOutboxRow);
    const inserted = new Set<string>();
    const seen = new Set<string>();
    const duplicates: OutboxRow[] = [];
    for (let start = 0; start < rows.length; start += SQL.ENQUEUE_MAX_ROWS) {
      const chunk = rows.slice(start, start + SQL.ENQUEUE_MAX_ROWS);
      const parameters = chunk.flatMap((row) => [
        row.id,
        row.type,
        row.aggregate_type,
        row.aggregate_id,
        row.organization_id,
        row.request_id,
        JSON.stringify(row.payload),
        JSON.stringify(row.metadata),
        row.causation_id,
        row.correlation_id,
      ]);
      const notify = options.notify ?? true;
      if (notify) parameters.push(this.channel);
      const result = await this.inTransaction(
        'enqueue',
        manager,
        SQL.enqueueStatement(chunk.length, notify),
        parameters,
        (written: { id: string }[]) => written.forEach((row) => inserted.add(row.id)),
      );
      if (!result.ok) return result;
    }
    // An id repeated within one call is written once; its later copies are duplicates of it.
    const enqueued = rows.map((row) => {
      const duplicate = !inserted.has(row.id) || seen.has(row.id);
      seen.add(row.id);
      if (duplicate) duplicates.push(row);
      return { id: row.id, duplicate };
    });
    if (duplicates.length > 0) {
      const conflicts = await this.inTransaction(
        'enqueue',
        manager,
        SQL.FIND_CONFLICTING,
        [JSON.stringify(duplicates)],
        (found: { id: string; type: string }[]) => found,
      );
      if (!conflicts.ok) return conflicts;
      const [conflict] = conflicts.value;
      if (conflict) throw new OutboxEventConflictError(conflict.id, conflict.type);
    }
    return ok(enqueued);
  }

  /**
   * Leases due live and dead rows for `leaseMs`. Claim order is due order: the time each row
   * became claimable, ties by id (time-ordered UUIDv7, so occurrence order for generated ids).
   */
  async claim(options: ClaimOptions): Promise<OutboxResult<OutboxRecord[]>> {
    return this.own(
      'claim',
      SQL.CLAIM,
      [options.limit, options.leaseMs, typeFilter(options)],
      (rows: ClaimedRow[]) => rows.map(toRecord),
      // A claim lost in a server crash only makes its rows claimable again at once, which is
      // what a lease that never happened should mean; settles keep the server's durability.
      { asyncCommit: true },
    );
  }

  /** Marks rows delivered; rows whose attempt count moved on are reported stale and untouched. */
  async markDelivered(settles: readonly DeliveredSettle[]): Promise<OutboxResult<SettleOutcome>> {
    if (settles.length === 0) return ok({ settled: [], stale: [] });
    const input = settles.map((s) => ({ id: s.id, attempts: s.attempts, handlers: s.handlers }));
    return this.own(
      'markDelivered',
      SQL.MARK_DELIVERED,
      [JSON.stringify(input), input.map((s) => s.id)],
      (rows: { id: string }[]) => splitStale(settles, rows),
    );
  }

  /**
   * Records failed attempts: each failed handler's count and retry time (`failures`), and the
   * event due at the earliest retry of its `pending` handlers (or after `retryDelayMs`); or the
   * dead state (`dead`, or without it `maxAttempts` event attempts) with one
   * `outbox.event.dead` announcement written in the same statement. A row that is or
   * becomes dead is replayed after `deadRetryMs`. A row no longer leased (already settled or
   * given back for this attempt) is reported stale.
   */
  async markFailed(
    settles: readonly FailedSettle[],
    options: MarkFailedOptions,
  ): Promise<OutboxResult<FailOutcome>> {
    if (settles.length === 0) return ok({ settled: [], stale: [], newlyDead: [] });
    const input = settles.map((s) => ({
      id: s.id,
      attempts: s.attempts,
      handlers: s.handlers,
      failed_handlers: s.failedHandlers,
      error: s.error === null ? null : scrubError(s.error),
      retry_ms: Math.max(0, s.retryDelayMs),
      dead_event_id: uuidv7(),
      dead: s.dead ?? null,
      failures: (s.failures ?? []).map((f) => ({
        handler: f.handler,
        count: f.count,
        delay_ms: f.delayMs === null ? null : Math.max(0, f.delayMs),
      })),
      pending: s.pending ?? [],
    }));
    return this.own(
      'markFailed',
      SQL.MARK_FAILED,
      [
        JSON.stringify(input),
        options.maxAttempts,
        this.channel,
        OUTBOX_EVENT_DEAD,
        OUTBOX_EVENT_AGGREGATE,
        input.map((s) => s.id),
        JSON.stringify(
          Object.fromEntries(
            Object.entries(options.deadRetryByType ?? {}).map(([type, ms]) => [
              type,
              deadRetryParameter(ms),
            ]),
          ),
        ),
        deadRetryParameter(options.deadRetryMs),
      ],
      (rows: { id: string; becomes_dead: boolean }[]) => ({
        ...splitStale(settles, rows),
        newlyDead: rows.filter((row) => row.becomes_dead).map((row) => row.id),
      }),
    );
  }

  /**
   * Makes the given dead events due now, so they are replayed at once rather than after
   * `deadRetryMs`; returns the ids it changed (dead, not delivered, not being replayed already).
   */
  async replayDead(ids: readonly string[]): Promise<OutboxResult<string[]>> {
    if (ids.length === 0) return ok([]);
    return this.own(
      'replayDead',
      SQL.REPLAY_DEAD,
      [[...ids], this.channel],
      (rows: { id: string }[]) => rows.map((row) => row.id),
    );
  }

  /**
   * Events matching `filter`, in emit order (at most `limit`): through `manager`'s transaction
   * when it has one, so what it wrote and has not committed yet is seen. For the testing kit.
   */
  async findEvents(
    filter: OutboxEventFilter,
    options: { manager?: EntityManager; limit?: number } = {},
  ): Promise<OutboxResult<EmittedOutboxEvent[]>> {
    const parameters = [...filterParameters(filter), options.limit ?? FIND_EVENTS_LIMIT];
    const map = (rows: EmittedRow[]) => rows.map(toEmitted);
    const manager = options.manager;
    return manager?.queryRunner?.isTransactionActive
      ? this.inTransaction('findEvents', manager, SQL.FIND_EVENTS, parameters, map)
      : this.own('findEvents', SQL.FIND_EVENTS, parameters, map);
  }

  /**
   * Makes live events matching `filter` that wait for a retry due now, each retrying handler
   * included, and wakes the dispatchers. Returns their ids. For the testing kit.
   */
  async makeDue(filter: OutboxEventFilter): Promise<OutboxResult<string[]>> {
    return this.own(
      'makeDue',
      SQL.MAKE_DUE,
      [...filterParameters(filter), this.channel],
      (rows: { id: string }[]) => rows.map((row) => row.id),
    );
  }

  /** A page of dead letters (see `LIST_DEAD_LETTERS`), and the cursor of the next one. */
  async listDeadLetters(
    filter: DeadLetterFilter,
    page: { limit: number; after: { at: string; id: string } | null },
  ): Promise<OutboxResult<DeadLetterList>> {
    const parameters = [
      ...deadLetterParameters(filter),
      page.after?.at ?? null,
      page.after?.id ?? null,
      page.limit + 1,
    ];
    return this.own(
      'listDeadLetters',
      SQL.listDeadLettersStatement(filter.includeRetrying ?? false),
      parameters,
      (rows: DeadLetterRow[]) => {
        const items = rows.slice(0, page.limit);
        const last = items[items.length - 1];
        return {
          items: items.map(toDeadLetter),
          next: rows.length > page.limit && last ? encodeCursor(last) : null,
        };
      },
    );
  }

  /** Dead letters grouped by type, failed handler and error fingerprint, largest first. */
  async groupDeadLetters(
    filter: DeadLetterFilter,
    limit: number,
  ): Promise<OutboxResult<DeadLetterGroup[]>> {
    return this.own(
      'groupDeadLetters',
      SQL.GROUP_DEAD_LETTERS,
      [...deadLetterParameters(filter), limit],
      (rows: GroupRow[]) =>
        rows.map((row) => ({
          type: row.type,
          handler: row.handler,
          fingerprint: row.fingerprint,
          sampleError: row.sample_error,
          count: row.count,
          firstSeenAt: row.first_seen_at,
          lastSeenAt: row.last_seen_at,
        })),
    );
  }

  /** One event whole, or null when there is none with this id. */
  async findEvent(id: string): Promise<OutboxResult<OutboxEventDetail | null>> {
    return this.own('findEvent', SQL.FIND_EVENT, [id], ([row]: DetailRow[]) =>
      row
        ? {
            ...toEvent(row),
            attempts: row.attempts,
            deliveries: row.deliveries,
            failures: row.failures,
            lastError: row.last_error,
            leaseExpiresAt: row.lease_expires_at,
            nextAttemptAt: row.next_attempt_at,
            dispatchedAt: row.dispatched_at,
            deadAt: row.dead_at,
            discardedAt: row.discarded_at,
            discardReason: row.discard_reason,
          }
        : null,
    );
  }

  /**
   * One batch of `OutboxAdmin.replay` or `discard`: the rows that `filter` and `ids` select
   * after `afterId` (by id), at most `limit`, changed unless `dryRun`, each change recorded as an
   * `outbox.event.replayed` / `outbox.event.discarded` event in the same statement. Returns the
   * selected ids in order, each with whether it changed.
   */
  async changeDeadLetters(
    batch: DeadLetterChangeBatch,
  ): Promise<OutboxResult<{ id: string; type: string; changed: boolean }[]>> {
    const replay = batch.change.kind === 'replay';
    return this.own(
      replay ? 'replayDeadLetters' : 'discardDeadLetters',
      replay ? SQL.REPLAY_SELECTED : SQL.DISCARD_SELECTED,
      [
        ...deadLetterParameters(batch.filter),
        batch.ids ? [...batch.ids] : null,
        batch.afterId,
        batch.limit,
        batch.change.kind === 'replay' && batch.change.handlers ? [...batch.change.handlers] : null,
        batch.dryRun,
        replay ? OUTBOX_EVENT_REPLAYED : OUTBOX_EVENT_DISCARDED,
        Array.from({ length: batch.limit }, () => uuidv7()),
        this.channel,
        JSON.stringify(
          batch.change.kind === 'replay'
            ? { handlers: batch.change.handlers ?? null, actor: batch.actor ?? null }
            : { reason: batch.change.reason, actor: batch.actor ?? null },
        ),
      ],
      (rows: { id: string; type: string; changed: boolean }[]) =>
        rows.map((row) => ({ id: row.id, type: row.type, changed: row.changed })),
    );
  }

  /**
   * Records one handler's delivery inside the handler's own transaction (`manager`), guarded by
   * the attempt its claim holds. False when the guard failed (the lease was lost and the event
   * claimed again, or it was settled): the caller must roll the transaction back.
   */
  async recordDelivery(
    manager: EntityManager,
    delivery: { id: string; attempts: number; handler: string },
  ): Promise<OutboxResult<boolean>> {
    return this.inTransaction(
      'recordDelivery',
      manager,
      SQL.RECORD_DELIVERY,
      [delivery.id, delivery.attempts, delivery.handler],
      (rows: { id: string }[]) => rows.length === 1,
    );
  }

  /**
   * Prepares a transactional handler's transaction: bounds its statements by `budgetMs` and
   * returns what `cancelBackend` needs to find it.
   */
  async prepareHandlerTransaction(
    manager: EntityManager,
    budgetMs: number,
  ): Promise<OutboxResult<BackendTransaction>> {
    return this.inTransaction(
      'prepareHandlerTransaction',
      manager,
      SQL.HANDLER_TRANSACTION_SETUP,
      [String(Math.max(1, Math.ceil(budgetMs)))],
      ([row]: { pid: number; started_us: string }[]) => ({
        pid: row.pid,
        startedUs: row.started_us,
      }),
    );
  }

  /**
   * Cancels the statement of a handler's transaction, from a connection of its own; does
   * nothing once that backend has left the transaction.
   */
  async cancelBackend(transaction: BackendTransaction): Promise<OutboxResult<boolean>> {
    return this.own(
      'cancelBackend',
      SQL.CANCEL_BACKEND,
      [transaction.pid, transaction.startedUs],
      ([row]: { cancelled: boolean }[]) => row.cancelled,
    );
  }

  /**
   * Gives back claimed rows whose handlers never started, so another instance can take them at
   * once; the attempt that never ran is not counted.
   */
  async release(
    claims: readonly { id: string; attempts: number }[],
  ): Promise<OutboxResult<SettleOutcome>> {
    if (claims.length === 0) return ok({ settled: [], stale: [] });
    const input = claims.map((c) => ({ id: c.id, attempts: c.attempts }));
    return this.own(
      'release',
      SQL.RELEASE,
      [JSON.stringify(input), input.map((c) => c.id), this.channel],
      (rows: { id: string }[]) => splitStale(claims, rows),
    );
  }

  /**
   * Milliseconds until the earliest unsettled row (live or dead) is due: 0 when one is due now,
   * null when nothing is unsettled. Two index probes, whatever the backlog.
   */
  async nextDue(options: TypeFilterOptions = {}): Promise<OutboxResult<number | null>> {
    return this.own(
      'nextDue',
      SQL.NEXT_DUE,
      [typeFilter(options)],
      ([row]: { next_due_in_ms: number | null }[]) => toDueInMs(row.next_due_in_ms),
    );
  }

  /**
   * When the next row is due, how long the oldest due row has waited, and counts by state, at a
   * cost that does not grow with the backlog: each count reads at most `countLimit` index
   * entries (default 1000) and stops there, so a count equal to `countLimit` means "at least".
   */
  async pendingState(options: PendingStateOptions = {}): Promise<OutboxResult<PendingState>> {
    const countLimit = options.countLimit ?? DEFAULT_COUNT_LIMIT;
    if (!Number.isSafeInteger(countLimit) || countLimit < 1) {
      throw new RangeError(
        `pendingState: countLimit must be a positive integer, got ${countLimit}`,
      );
    }
    return this.own(
      'pendingState',
      SQL.PENDING_STATE,
      [typeFilter(options), countLimit],
      ([row]: StateRow[]) => toPendingState(row, countLimit),
    );
  }

  /**
   * `pendingState` with exact counts (`countLimit` null), for an admin page. It scans every
   * unsettled row, so its cost grows with the backlog: keep it off probes and hot paths.
   */
  async exactState(options: TypeFilterOptions = {}): Promise<OutboxResult<PendingState>> {
    return this.own('exactState', SQL.EXACT_STATE, [typeFilter(options)], ([row]: StateRow[]) =>
      toPendingState(row, null),
    );
  }

  /** Writes a dispatcher's report of itself (see `REPORT_DISPATCHER`). */
  async reportDispatcher(report: DispatcherReport): Promise<OutboxResult<void>> {
    return this.own(
      'reportDispatcher',
      SQL.REPORT_DISPATCHER,
      [
        report.id,
        report.host,
        report.pid,
        report.state,
        report.listener,
        report.types ? [...report.types] : null,
        report.concurrency,
        report.inFlight,
        report.startedAt,
        report.lastClaimAt,
      ],
      () => undefined,
    );
  }

  /** Removes a stopping dispatcher's report. */
  async forgetDispatcher(id: string): Promise<OutboxResult<void>> {
    return this.own('forgetDispatcher', SQL.FORGET_DISPATCHER, [id], () => undefined);
  }

  /** Every dispatcher's last report, and how long ago it came. */
  async listDispatchers(): Promise<
    OutboxResult<(DispatcherReport & { seenAt: Date; silentMs: number })[]>
  > {
    return this.own('listDispatchers', SQL.LIST_DISPATCHERS, [], (rows: DispatcherRow[]) =>
      rows.map((row) => ({
        id: row.id,
        host: row.host,
        pid: row.pid,
        state: row.state,
        listener: row.listener,
        types: row.types,
        concurrency: row.concurrency,
        inFlight: row.in_flight,
        startedAt: row.started_at,
        lastClaimAt: row.last_claim_at,
        seenAt: row.seen_at,
        silentMs: Math.max(0, row.silent_ms),
      })),
    );
  }

  /** Events delivered per minute over the last `minutes` minutes (see `THROUGHPUT`). */
  async throughput(minutes: number): Promise<OutboxResult<MinuteCount[]>> {
    return this.own(
      'throughput',
      SQL.THROUGHPUT,
      [minutes],
      (rows: { minute: Date; delivered: number }[]) =>
        rows.map((row) => ({ at: row.minute, delivered: row.delivered })),
    );
  }

  /** Undelivered events by type and state (see `BACKLOG_BY_TYPE`); grows with the backlog. */
  async backlogByType(): Promise<OutboxResult<TypeBacklog[]>> {
    return this.own('backlogByType', SQL.BACKLOG_BY_TYPE, [], (rows: BacklogRow[]) =>
      rows.map((row) => ({
        type: row.type,
        due: row.due,
        retrying: row.retrying,
        inFlight: row.in_flight,
        expiredLeases: row.expired_leases,
        dead: row.dead,
        discarded: row.discarded,
        oldestDueWaitMs:
          row.oldest_due_wait_ms === null ? null : Math.max(0, Math.floor(row.oldest_due_wait_ms)),
        nextDueInMs: toDueInMs(row.next_due_in_ms),
      })),
    );
  }

  /**
   * Deletes delivered rows older than the retention, one short batch per statement, until a
   * batch comes back short (or `maxBatches` is reached). Returns how many rows were deleted.
   */
  async sweep(options: SweepOptions): Promise<OutboxResult<number>> {
    return this.sweepWith('sweep', SQL.SWEEP_BATCH, options);
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
      const result = await this.own(
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

  /**
   * Deletes discarded rows kept longer than `retentionMs`, in batches as `sweep` does. Returns
   * how many rows were deleted.
   */
  async sweepDiscarded(options: SweepOptions): Promise<OutboxResult<number>> {
    return this.sweepWith('sweepDiscarded', SQL.SWEEP_DISCARDED_BATCH, options);
  }

  /** Sends a NOTIFY on the channel now, on a connection of its own (a coalesced trailing wake). */
  async wake(): Promise<OutboxResult<void>> {
    return this.own('wake', SQL.WAKE, [this.channel], () => undefined);
  }

  /**
   * Gives up on every statement of the repository's own still waiting for an answer, discarding
   * their connections, so a shutdown out of time leaves no pool connection checked out (the
   * DataSource could not close while one is). Their callers get a failed result; rows whose
   * settle was lost keep their lease and are claimed again after it.
   */
  abandonInFlight(): void {
    const current = this.inFlight;
    this.inFlight = new AbortController();
    current.abort();
  }

  /** One of the repository's own statements, bounded in time (see `runBounded`). */
  private async own<R, T>(
    operation: string,
    sql: string,
    parameters: unknown[],
    map: (rows: R) => T,
    options: { asyncCommit?: boolean } = {},
  ): Promise<OutboxResult<T>> {
    if (!hasPoolDriver(this.dataSource)) {
      return fail(
        new OutboxStoreError(operation, 'the DataSource is not a PostgreSQL one', undefined),
      );
    }
    let rows: unknown[];
    try {
      rows = await runBounded(this.dataSource, sql, parameters, {
        ...this.bounds,
        ...options,
        signal: this.inFlight.signal,
      });
    } catch (err) {
      return fail(toStoreError(operation, err));
    }
    return ok(map(rows as R));
  }

  /** A statement in the caller's transaction, under the caller's own settings. */
  private async inTransaction<R, T>(
    operation: string,
    manager: EntityManager,
    sql: string,
    parameters: unknown[],
    map: (rows: R) => T,
  ): Promise<OutboxResult<T>> {
    let rows: R;
    try {
      // A structured result gives the rows whatever the statement's command.
      rows = (await manager.queryRunner!.query(sql, parameters, true)).records as R;
    } catch (err) {
      return fail(toStoreError(operation, err));
    }
    return ok(map(rows));
  }
}

function toStoreError(operation: string, err: unknown): OutboxStoreError {
  const driverError = (err as { driverError?: unknown }).driverError ?? err;
  const { code, constraint } = driverError as { code?: unknown; constraint?: unknown };
  // Only the driver's own message: TypeORM's wrapper and the driver error also hold the query
  // and its parameters, which must not travel any further.
  const message =
    driverError instanceof Error
      ? driverError.message
      : typeof driverError === 'string'
        ? driverError
        : 'unknown failure';
  return new OutboxStoreError(
    operation,
    scrubError(message),
    typeof code === 'string' ? code : undefined,
    typeof constraint === 'string' ? constraint : undefined,
  );
}

/** A dead retry as MARK_FAILED takes it: -1 for none (Infinity), else at least 0. */
function deadRetryParameter(ms: number): number {
  return ms === Infinity ? -1 : Math.max(0, ms);
}

function typeFilter(options: { types?: readonly string[] }): string[] | null {
  return options.types?.length ? [...options.types] : null;
}

function toDueInMs(ms: number | null): number | null {
  return ms === null ? null : Math.max(0, Math.ceil(ms));
}

function toPendingState(row: StateRow, countLimit: number | null): PendingState {
  return {
    nextDueInMs: toDueInMs(row.next_due_in_ms),
    oldestDueWaitMs:
      row.oldest_due_wait_ms === null ? null : Math.max(0, Math.floor(row.oldest_due_wait_ms)),
    due: row.due,
    retrying: row.retrying,
    inFlight: row.in_flight,
    expiredLeases: row.expired_leases,
    dead: row.dead,
    countLimit,
  };
}

function splitStale(
  settles: readonly { id: string }[],
  written: readonly { id: string }[],
): SettleOutcome {
  const settledIds = new Set(written.map((row) => row.id));
  return {
    settled: settles.filter((s) => settledIds.has(s.id)).map((s) => s.id),
    stale: settles.filter((s) => !settledIds.has(s.id)).map((s) => s.id),
  };
}

function toEvent(row: EventRow): OutboxEvent {
  return {
    id: row.id,
    type: row.type,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    organizationId: row.organization_id,
    requestId: row.request_id,
    payload: row.payload,
    metadata: row.metadata,
    occurredAt: row.occurred_at,
    causationId: row.causation_id,
    correlationId: row.correlation_id,
  };
}

function toRecord(row: ClaimedRow): OutboxRecord {
  return {
    ...toEvent(row),
    attempts: row.attempts,
    leaseExpiresAt: row.lease_expires_at,
    deliveries: row.deliveries,
    failures: row.failures,
    deadAt: row.dead_at,
    lastError: row.last_error,
  };
}

/** Most events one `findEvents` returns: a test that emits more asks for them by filter. */
const FIND_EVENTS_LIMIT = 1000;

function filterParameters(filter: OutboxEventFilter): unknown[] {
  return [
    filter.ids ? [...filter.ids] : null,
    filter.type ?? null,
    filter.aggregateType ?? null,
    filter.aggregateId ?? null,
    filter.correlationId ?? null,
  ];
}

interface EmittedRow extends EventRow {
  attempts: number;
  deliveries: Record<string, unknown>;
  dispatched_at: Date | null;
  dead_at: Date | null;
}

function toEmitted(row: EmittedRow): EmittedOutboxEvent {
  return {
    ...toEvent(row),
    attempts: row.attempts,
    deliveredTo: Object.keys(row.deliveries),
    dispatchedAt: row.dispatched_at,
    deadAt: row.dead_at,
  };
}

function deadLetterParameters(filter: DeadLetterFilter): unknown[] {
  return [
    filter.includeRetrying ?? false,
    filter.types ? [...filter.types] : null,
    filter.handler ?? null,
    filter.organizationId ?? null,
    filter.aggregateType ?? null,
    filter.aggregateId ?? null,
    filter.deadAfter ?? null,
    filter.deadBefore ?? null,
    filter.errorContains ?? null,
    filter.includeDiscarded ?? false,
    filter.fingerprint ?? null,
  ];
}

interface DispatcherRow {
  id: string;
  host: string;
  pid: number;
  state: string;
  listener: string;
  types: string[] | null;
  concurrency: number;
  in_flight: number;
  started_at: Date;
  last_claim_at: Date | null;
  seen_at: Date;
  silent_ms: number;
}

interface BacklogRow {
  type: string;
  due: number;
  retrying: number;
  in_flight: number;
  expired_leases: number;
  dead: number;
  discarded: number;
  oldest_due_wait_ms: number | null;
  next_due_in_ms: number | null;
}

interface GroupRow {
  type: string;
  handler: string | null;
  fingerprint: string;
  sample_error: string | null;
  count: number;
  first_seen_at: Date;
  last_seen_at: Date;
}

interface DetailRow extends EventRow {
  attempts: number;
  deliveries: Record<string, string>;
  failures: Record<string, HandlerFailure>;
  last_error: string | null;
  lease_expires_at: Date | null;
  next_attempt_at: Date | null;
  dispatched_at: Date | null;
  dead_at: Date | null;
  discarded_at: Date | null;
  discard_reason: string | null;
}
