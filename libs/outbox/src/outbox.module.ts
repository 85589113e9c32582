import {
  Inject,
  Logger,
  Module,
  type DynamicModule,
  type OnModuleInit,
  type Provider,
} from '@nestjs/common';
import { DiscoveryModule, ModuleRef } from '@nestjs/core';
import type { DataSource } from 'typeorm';
import { EventDispatcher } from './handlers/event.dispatcher';
import { HandlerRunner } from './handlers/handler.runner';
import { OutboxAdmin } from './admin/outbox.admin';
import { HandlerTransactions } from './handlers/handler.transactions';
import { OutboxEngine } from './engine/outbox.engine';
import { OutboxExplorer } from './handlers/outbox.explorer';
import { OutboxHealthIndicator } from './outbox.health';
import { OutboxLivenessIndicator } from './outbox.liveness';
import { OutboxMetadataAccessor } from './handlers/outbox-metadata.accessor';
import {
  ConfigurableOutboxModule,
  OUTBOX_MODULE_OPTIONS,
  OUTBOX_OPTIONS_TYPE,
} from './outbox.module-definition';
import { OutboxMessages } from './outbox.messages';
import type { OutboxModuleOptions, ResolvedOutboxOptions } from './outbox.options';
import { deprecatedTuningFields, resolveOutboxOptions } from './resolve-outbox-options';
import { OutboxPublisher } from './emit/outbox.publisher';
import { AdminStore } from './store/admin/admin.store';
import { InstanceReportStore } from './store/instance-report.store';
import { EventOrdering, OutboxEmitStore } from './store/emit/emit.store';
import { HandlerTransactionStore } from './store/handler-transaction.store';
import { OutboxLeaseStore } from './store/lease/lease.store';
import { RetentionStore } from './store/retention.store';
import type { OutboxStoreOptions } from './store/store.client';
import { TestingStore } from './store/testing.store';
import { HandlerLimitStore } from './store/limits/handler-limit.store';
import { HandlerLimits } from './handlers/handler-limits';
import { OutboxRetentionSweeper } from './engine/outbox-retention.sweeper';
import { findScheduler } from './engine/outbox.scheduler';
import { OutboxShutdownHook } from './engine/outbox-shutdown.hook';
import { OutboxTelemetry } from './telemetry/outbox.telemetry';
import { OUTBOX_DATA_SOURCE, OUTBOX_OPTIONS, OUTBOX_SCHEDULER } from './outbox.tokens';

/** A store of the module's own, on the app's DataSource, with the module's bounds. */
function store<T>(
  Store: new (dataSource: DataSource, options: OutboxStoreOptions) => T,
): Provider<T> {
  return {
    provide: Store,
    inject: [OUTBOX_DATA_SOURCE, OUTBOX_OPTIONS],
    useFactory: (dataSource: DataSource, options: ResolvedOutboxOptions) =>
      new Store(dataSource, {
        channel: options.listen.channel,
        statementTimeoutMs: options.tuning.statementTimeoutMs,
        lockTimeoutMs: options.tuning.lockTimeoutMs,
      }),
  };
}

/** One store per client: each part of the module reaches the table through its own. */
const stores: Provider[] = [
  store(OutboxLeaseStore),
  store(OutboxEmitStore),
  store(HandlerTransactionStore),
  store(AdminStore),
  store(InstanceReportStore),
  store(RetentionStore),
  store(TestingStore),
  store(HandlerLimitStore),
];

const providers: Provider[] = [
  {
    provide: OUTBOX_OPTIONS,
    inject: [OUTBOX_MODULE_OPTIONS],
    useFactory: (raw: OutboxModuleOptions) => resolveOutboxOptions(raw),
  },
  ...stores,
  {
    provide: OutboxTelemetry,
    // Its state gauges are wired by the engine, which knows where its claims start.
    useFactory: () => new OutboxTelemetry(),
  },
  {
    provide: OUTBOX_SCHEDULER,
    inject: [ModuleRef],
    useFactory: findScheduler,
  },
  OutboxMetadataAccessor,
  OutboxAdmin,
  HandlerTransactions,
  EventDispatcher,
  { provide: EventOrdering, useExisting: EventDispatcher },
  HandlerLimits,
  HandlerRunner,
  OutboxExplorer,
  OutboxPublisher,
  OutboxEngine,
  OutboxHealthIndicator,
  OutboxLivenessIndicator,
  OutboxRetentionSweeper,
  OutboxShutdownHook,
];

/**
 * The transactional outbox. `forRoot(options)` or `forRootAsync({ imports, inject, useFactory })`;
 * global by default (`isGlobal: false` to scope it), so any module can inject `OutboxPublisher`.
 */
@Module({
  imports: [DiscoveryModule],
  providers,
  exports: [
    OutboxPublisher,
    OutboxAdmin,
    EventDispatcher,
    OutboxEngine,
    OutboxHealthIndicator,
    OutboxLivenessIndicator,
    OutboxLeaseStore,
    OutboxRetentionSweeper,
    OUTBOX_OPTIONS,
    // For an inbox: it emits in transactions of its own on the outbox's DataSource.
    OUTBOX_DATA_SOURCE,
  ],
})
export class OutboxModule extends ConfigurableOutboxModule implements OnModuleInit {
  constructor(@Inject(OUTBOX_MODULE_OPTIONS) private readonly given: OutboxModuleOptions) {
    super();
  }

  /** At init, not when options resolve, so the warning goes to the app's own logger. */
  onModuleInit(): void {
    const deprecated = deprecatedTuningFields(this.given);
    if (deprecated.length > 0) {
      new Logger('Outbox').warn(OutboxMessages.deprecatedTuningOptions(deprecated));
    }
  }

  /** Validates right away, so a bad option fails the boot before anything connects. */
  static forRoot(options: typeof OUTBOX_OPTIONS_TYPE = {}): DynamicModule {
    const { isGlobal, dataSource, ...outboxOptions } = options;
    resolveOutboxOptions(outboxOptions);
    return super.forRoot(options);
  }
}
