import {
  Inject,
  Injectable,
  Logger,
  Optional,
  type BeforeApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import type { DataSource, EntityManager, EntitySubscriberInterface } from 'typeorm';
import { findAmbientTransactions, type AmbientTransactionHost } from './ambient-transaction.util';
import { OutboxTransactionRequiredError } from '../outbox.errors';
import { EventOrdering, type EnqueuedEvent } from '../store/emit/emit.store';
import type { NewOutboxEvent } from '../outbox-event.types';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { OutboxEmitStore } from '../store/emit/emit.store';
import { OUTBOX_DATA_SOURCE, OUTBOX_OPTIONS } from '../outbox.tokens';
import { WakeCoalescer } from './outbox-wake.coalescer';
import { OutboxTelemetry } from '../telemetry/outbox.telemetry';

export interface EmitOptions {
  /** The EntityManager of the caller's open transaction. */
  manager?: EntityManager;
  /**
   * `'id'` (default): resolve to the id(s). `'result'`: resolve to `{ id, duplicate }` per
   * event, `duplicate` telling that the id was already present with the same content.
   */
  returning?: 'id' | 'result';
}

export interface EmitResultOptions extends EmitOptions {
  returning: 'result';
}

const EMIT = 'OutboxPublisher.emit';

/**
 * Emits events inside the caller's transaction: through the given EntityManager, or through
 * the ambient transaction of `@nestjs-cls/transactional` (TypeORM adapter) when the app uses
 * it. Outside a transaction it throws `OutboxTransactionRequiredError` and writes nothing.
 * With `tuning.wakeCoalesceMs`, emits within a window share one wake (see `WakeCoalescer`). When the app
 * runs OpenTelemetry with a propagator, each emit is a PRODUCER span whose trace context is kept
 * in the events' metadata, so handler runs join the trace (see `OutboxTelemetry`).
 */
@Injectable()
export class OutboxPublisher implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger('Outbox');
  private transactionHost: AmbientTransactionHost | undefined;
  private readonly wakes: WakeCoalescer;

  constructor(
    private readonly store: OutboxEmitStore,
    private readonly moduleRef: ModuleRef,
    @Inject(OUTBOX_OPTIONS) private readonly options: ResolvedOutboxOptions,
    @Inject(OUTBOX_DATA_SOURCE) private readonly dataSource: DataSource,
    @Optional() private readonly telemetry: OutboxTelemetry = new OutboxTelemetry(),
    /** The handler registry's view of ordered handlers; none: nothing is sequenced. */
    @Optional() private readonly ordering?: EventOrdering,
  ) {
    this.wakes = new WakeCoalescer(options.tuning.wakeCoalesceMs, (dueFrom) =>
      this.sendWake(dueFrom),
    );
  }

  onModuleInit(): void {
    this.transactionHost = findAmbientTransactions(this.moduleRef)?.host;
    if (this.options.tuning.wakeCoalesceMs > 0) {
      // Every commit of the app passes here; for most it is one WeakSet lookup.
      const subscriber: EntitySubscriberInterface = {
        afterTransactionCommit: ({ queryRunner }) => this.wakes.committed(queryRunner),
      };
      this.dataSource.subscribers.push(subscriber);
    }
  }

  /** A coalesced wake, tried twice: a wake lost would leave committed events to the poll. */
  private async sendWake(dueFrom: number | null): Promise<void> {
    for (let attempt = 1; attempt <= 2; attempt++) {
      const result = await this.store.wake(dueFrom);
      if (result.ok) return;
      if (attempt === 2) this.logger.warn(`Outbox wake not sent: ${result.error.message}`);
    }
  }

  /** A trailing wake still planned goes out before the DataSource closes. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.wakes.flush();
  }

  emit<P>(event: NewOutboxEvent<P>, options: EmitResultOptions): Promise<EnqueuedEvent>;
  emit<P>(
    events: readonly NewOutboxEvent<P>[],
    options: EmitResultOptions,
  ): Promise<EnqueuedEvent[]>;
  emit<P>(event: NewOutboxEvent<P>, options?: EmitOptions): Promise<string>;
  emit<P>(events: readonly NewOutboxEvent<P>[], options?: EmitOptions): Promise<string[]>;
  /**
   * Writes the event(s) in the caller's transaction. Emitting an id again with the same content
   * is a no-op reported as `duplicate`; with different content it throws
   * `OutboxEventConflictError`.
   */
  async emit(
    events: NewOutboxEvent | readonly NewOutboxEvent[],
    options: EmitOptions = {},
  ): Promise<string | string[] | EnqueuedEvent | EnqueuedEvent[]> {
    const manager = options.manager ?? this.ambientManager();
    if (!manager?.queryRunner?.isTransactionActive) throw new OutboxTransactionRequiredError(EMIT);
    const runner = manager.queryRunner;
    const notify = this.wakes.inline(runner);
    const list: readonly NewOutboxEvent[] = Array.isArray(events) ? events : [events];
    const result = await this.telemetry.emitting(list, (traced) =>
      this.store.enqueue(manager, traced, {
        notify,
        dueFrom: (epochMs) => this.wakes.emitted(runner, epochMs),
        ordering: this.ordering,
      }),
    );
    if (!result.ok) throw result.error;
    const enqueued = result.value;
    if (options.returning === 'result') return Array.isArray(events) ? enqueued : enqueued[0];
    const ids = enqueued.map((e) => e.id);
    return Array.isArray(events) ? ids : ids[0];
  }

  private ambientManager(): EntityManager | undefined {
    const host = this.transactionHost;
    if (!host?.isTransactionActive()) return undefined;
    return host.tx as EntityManager;
  }
}
