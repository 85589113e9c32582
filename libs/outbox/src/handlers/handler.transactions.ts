import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import {
  findAmbientTransactions,
  type AmbientTransactions,
} from '../emit/ambient-transaction.util';
import type { DataSource, EntityManager } from 'typeorm';
import { OutboxHandlerTransactionEndedError, OutboxLeaseLostError } from '../outbox.errors';
import type { NewOutboxEvent } from '../outbox-event.types';
import type { OutboxEvent } from '../outbox-event.types';
import type {
  FollowUpEmit,
  OutboxIsolationLevel,
  TransactionalHandlerContext,
} from './outbox-handler.types';
import { OutboxPublisher } from '../emit/outbox.publisher';
import { HandlerTransactionStore } from '../store/handler-transaction.store';
import { type BackendTransaction, type HandlerDelivery } from '../store/handler-transaction.store';
import { DrivenTransaction } from '../store/driven-transaction';
import type { OutboxResult } from '../store/outbox.result';
import { AbortableSemaphore } from '../common/abortable-semaphore.util';
import { OUTBOX_DATA_SOURCE } from '../outbox.tokens';

/** One run of a transactional handler, as the engine sees it. */
export interface HandlerTransactionRun {
  /** The handler's writes and its delivery record committed; rejects when they rolled back. */
  committed: Promise<void>;
  /** The transaction is over and the handler has returned (or thrown), whichever comes last. */
  ended: Promise<void>;
}

export interface HandlerTransactionRequest {
  event: OutboxEvent;
  /** The attempt the claim holds: the guard of the delivery record. */
  attempt: number;
  handlerName: string;
  /**
   * The handler is the last one the event waits for: its delivery record marks the event
   * delivered too, in the same commit, and the event needs no settle after it.
   */
  settlesEvent: boolean;
  budgetMs: number;
  isolationLevel: OutboxIsolationLevel;
  /** Aborted at the budget or at shutdown: the transaction rolls back at once. */
  signal: AbortSignal;
  invoke: (transaction: Pick<TransactionalHandlerContext, 'manager' | 'emit'>) => unknown;
}

/** The ambient TransactionHost serves another DataSource: the outbox opens its own transactions. */
class ForeignAmbientTransaction extends Error {}

/**
 * Runs transactional handlers: each in a transaction of its own on the outbox's DataSource, whose
 * last statement records the handler in the event's `deliveries`, guarded by the claimed
 * attempt. The handler's writes and its delivery commit together, so a handler that only writes
 * to this database has exactly-once effects: a crash before COMMIT leaves nothing and it runs
 * again; a COMMIT makes every later claim skip it; a claim lost to another instance makes the
 * guard match nothing and everything rolls back.
 *
 * A handler past its budget (or abandoned at shutdown) is rolled back at once: its running
 * statement is cancelled and its connection given back, even if the handler ignores its signal.
 */
@Injectable()
export class HandlerTransactions implements OnModuleInit {
  private readonly logger = new Logger('Outbox');
  private ambient: AmbientTransactions | undefined;
  private slots = new AbortableSemaphore(1);

  constructor(
    @Inject(OUTBOX_DATA_SOURCE) private readonly dataSource: DataSource,
    private readonly store: HandlerTransactionStore,
    private readonly publisher: OutboxPublisher,
    private readonly moduleRef: ModuleRef,
  ) {}

  onModuleInit(): void {
    this.ambient = findAmbientTransactions(this.moduleRef);
    const poolSize = poolSizeOf(this.dataSource);
    this.slots = new AbortableSemaphore(Math.max(1, poolSize - RESERVED_CONNECTIONS));
  }

  run(request: HandlerTransactionRequest): HandlerTransactionRun {
    let handlerEnded: Promise<unknown> = Promise.resolve();
    const committed = this.slots.acquire(request.signal).then(async (release) => {
      try {
        await this.open(request, (handler) => {
          handlerEnded = handler;
        });
      } finally {
        release();
      }
    });
    const ended = committed
      .then(
        () => undefined,
        () => undefined,
      )
      .then(() => handlerEnded)
      .then(() => undefined);
    return { committed, ended };
  }

  /** Inside the transaction: the handler, then its guarded delivery record. */
  private async work(
    manager: EntityManager,
    request: HandlerTransactionRequest,
    started: (handler: Promise<unknown>) => void,
    steps: TransactionSteps,
  ): Promise<void> {
    const { signal } = request;
    if (signal.aborted) throw signal.reason;
    const prepared = await steps.prepare(request.budgetMs, request.isolationLevel);
    if (!prepared.ok) throw prepared.error;
    const open = { value: true };
    const abandoned = this.abandonOnAbort(manager, prepared.value, signal);
    try {
      const handler = new Promise((resolve) =>
        resolve(request.invoke({ manager, emit: this.followUps(manager, request, open) })),
      );
      started(handler.catch(() => undefined));
      await Promise.race([handler, abandoned.promise]);
      const recorded = await Promise.race([
        steps.record({
          id: request.event.id,
          attempts: request.attempt,
          handler: request.handlerName,
          settles: request.settlesEvent,
        }),
        abandoned.promise,
      ]);
      if (!recorded.ok) throw recorded.error;
      if (!recorded.value) {
        throw new OutboxLeaseLostError(request.handlerName, request.event.id, request.attempt);
      }
      // Past the budget, nothing commits that has not yet: the connection is being discarded.
      if (signal.aborted && !steps.recordCommits) await abandoned.promise;
    } finally {
      open.value = false;
      abandoned.dispose();
    }
  }

  /**
   * When the signal aborts (the budget is spent, or shutdown abandons the handler), the
   * transaction ends at once, whatever the handler does: its connection is discarded (the server
   * rolls the transaction back, and TypeORM refuses every later query of the handler, so nothing
   * it sends afterwards can run outside the transaction), and the statement it is running is
   * cancelled, so the server does not finish it first. The returned promise rejects with the
   * abort reason once that is done; it never resolves.
   */
  private abandonOnAbort(
    manager: EntityManager,
    transaction: BackendTransaction,
    signal: AbortSignal,
  ): { promise: Promise<never>; dispose: () => void } {
    let onAbort = () => undefined as void;
    const promise = new Promise<never>((_resolve, reject) => {
      onAbort = () => {
        discardConnection(manager);
        void this.store.cancelBackend(transaction).finally(() => reject(signal.reason as Error));
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    // Nobody may be waiting on it when it rejects (the handler won the race).
    promise.catch(() => undefined);
    return { promise, dispose: () => signal.removeEventListener('abort', onAbort) };
  }

  /** `ctx.emit`: writes in the handler's transaction, carrying causation and correlation. */
  private followUps(
    manager: EntityManager,
    request: HandlerTransactionRequest,
    open: { value: boolean },
  ): FollowUpEmit {
    const parent = request.event;
    const carry = (event: NewOutboxEvent): NewOutboxEvent => ({
      ...event,
      causationId: event.causationId !== undefined ? event.causationId : parent.id,
      correlationId:
        event.correlationId !== undefined
          ? event.correlationId
          : (parent.correlationId ?? parent.id),
      requestId: event.requestId !== undefined ? event.requestId : parent.requestId,
      organizationId:
        event.organizationId !== undefined ? event.organizationId : parent.organizationId,
    });
    const emit = (events: NewOutboxEvent | readonly NewOutboxEvent[]) => {
      if (!open.value) {
        return Promise.reject(new OutboxHandlerTransactionEndedError(request.handlerName));
      }
      return Array.isArray(events)
        ? this.publisher.emit((events as readonly NewOutboxEvent[]).map(carry), { manager })
        : this.publisher.emit(carry(events as NewOutboxEvent), { manager });
    };
    return emit as FollowUpEmit;
  }

  /**
   * A transaction on the outbox's DataSource: through the app's `@nestjs-cls/transactional`
   * host when it has one for this DataSource (so services the handler calls join it through
   * `txHost.tx` or `@Transactional()`), one of the outbox's own otherwise.
   */
  private async open(
    request: HandlerTransactionRequest,
    started: (handler: Promise<unknown>) => void,
  ): Promise<void> {
    const ambient = this.ambient;
    if (ambient) {
      const { host, requiresNew } = ambient;
      try {
        // No isolation level here: the setup sets it in its own round trip (see `prepare`).
        return await host.withTransaction(requiresNew, {}, () => {
          const manager = host.tx as EntityManager | undefined;
          if (manager?.connection !== this.dataSource) throw new ForeignAmbientTransaction();
          return this.work(manager, request, started, this.joined(manager));
        });
      } catch (error) {
        if (!(error instanceof ForeignAmbientTransaction)) throw error;
        this.ambient = undefined;
        this.logger.warn(
          'The @nestjs-cls/transactional TransactionHost serves another DataSource than the ' +
            "outbox's: transactional handlers open their own transactions, which services " +
            'reach only through ctx.manager',
        );
      }
    }
    return this.own(request, started);
  }

  /**
   * The outbox's own transaction, three round trips in all when the handler sends one
   * statement: its start with the setup, the handler's, and its delivery record with the
   * `COMMIT` (see `DrivenTransaction`). Through TypeORM's `transaction` when its query runner
   * cannot be driven so.
   */
  private async own(
    request: HandlerTransactionRequest,
    started: (handler: Promise<unknown>) => void,
  ): Promise<void> {
    const runner = this.dataSource.createQueryRunner();
    try {
      await runner.connect();
      const driven = DrivenTransaction.on(runner);
      if (!driven) {
        return await runner.manager.transaction((manager) =>
          this.work(manager, request, started, this.joined(manager)),
        );
      }
      try {
        await this.work(driven.manager, request, started, {
          prepare: (budgetMs, level) => this.store.begin(driven, budgetMs, level),
          record: (delivery) => this.store.recordDeliveryAndCommit(driven, delivery),
          recordCommits: true,
        });
      } catch (error) {
        await driven.rollback().catch(() => undefined);
        throw error;
      }
    } finally {
      await runner.release();
    }
  }

  /** The steps in a transaction begun by someone else, who commits it after `work`. */
  private joined(manager: EntityManager): TransactionSteps {
    return {
      prepare: (budgetMs, level) => this.store.prepare(manager, budgetMs, level),
      record: (delivery) => this.store.recordDelivery(manager, delivery),
      recordCommits: false,
    };
  }
}

/** How a handler's transaction is set up and its delivery recorded (see `work`). */
interface TransactionSteps {
  prepare(
    budgetMs: number,
    isolationLevel: OutboxIsolationLevel,
  ): Promise<OutboxResult<BackendTransaction>>;
  record(delivery: HandlerDelivery): Promise<OutboxResult<boolean>>;
  /** Whether `record` commits the transaction as well. */
  recordCommits: boolean;
}

/** Connections left to claims, settles and cancels, however many handler transactions run. */
const RESERVED_CONNECTIONS = 2;

/** The pool's size: pg's `max` as TypeORM configured it (pg's default is 10). */
function poolSizeOf(dataSource: DataSource): number {
  const driver = dataSource.driver as { master?: { options?: { max?: unknown } } };
  const max = driver.master?.options?.max;
  return typeof max === 'number' && max > 0 ? max : 10;
}

/**
 * Gives the transaction's connection back as broken, so the pool closes it: the server rolls the
 * transaction back when the connection ends, and the query runner counts as released, so TypeORM
 * refuses any further query through `manager` (its own ROLLBACK included, which it ignores).
 */
function discardConnection(manager: EntityManager): void {
  const runner = manager.queryRunner as
    { releasePostgresConnection?: (error?: Error) => Promise<void> } | undefined;
  void runner
    ?.releasePostgresConnection?.(new Error('outbox handler transaction abandoned'))
    .catch(() => undefined);
}
