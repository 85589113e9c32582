import { Module, type DynamicModule, type Provider } from '@nestjs/common';
import { DiscoveryModule, ModuleRef } from '@nestjs/core';
import type { DataSource } from 'typeorm';
import { EventDispatcher } from './handlers/event.dispatcher';
import { OutboxAdmin } from './admin/outbox.admin';
import { HandlerTransactions } from './handlers/handler.transactions';
import { OutboxDispatcher } from './engine/outbox.dispatcher';
import { OutboxExplorer } from './handlers/outbox.explorer';
import { OutboxHealthIndicator } from './outbox.health';
import { OutboxMetadataAccessor } from './handlers/outbox-metadata.accessor';
import {
  ConfigurableOutboxModule,
  OUTBOX_MODULE_OPTIONS,
  OUTBOX_OPTIONS_TYPE,
} from './outbox.module-definition';
import {
  resolveOutboxOptions,
  type OutboxModuleOptions,
  type ResolvedOutboxOptions,
} from './outbox.options';
import { OutboxPublisher } from './emit/outbox.publisher';
import { OutboxRepository } from './store/outbox.repository';
import { OutboxRetentionSweeper } from './engine/outbox-retention.sweeper';
import { findScheduler } from './engine/outbox.scheduler';
import { OutboxShutdownHook } from './engine/outbox-shutdown.hook';
import { OutboxTelemetry } from './common/outbox.telemetry';
import { OUTBOX_DATA_SOURCE, OUTBOX_OPTIONS, OUTBOX_SCHEDULER } from './outbox.tokens';

const providers: Provider[] = [
  {
    provide: OUTBOX_OPTIONS,
    inject: [OUTBOX_MODULE_OPTIONS],
    useFactory: (raw: OutboxModuleOptions) => resolveOutboxOptions(raw),
  },
  {
    provide: OutboxRepository,
    inject: [OUTBOX_DATA_SOURCE, OUTBOX_OPTIONS],
    useFactory: (dataSource: DataSource, options: ResolvedOutboxOptions) =>
      new OutboxRepository(dataSource, {
        channel: options.listen.channel,
        statementTimeoutMs: options.statementTimeoutMs,
        lockTimeoutMs: options.lockTimeoutMs,
      }),
  },
  {
    provide: OutboxTelemetry,
    inject: [OutboxRepository, OUTBOX_OPTIONS],
    useFactory: (repository: OutboxRepository, options: ResolvedOutboxOptions) => {
      const telemetry = new OutboxTelemetry();
      telemetry.observeStateFrom(() => repository.pendingState({ types: options.types }));
      return telemetry;
    },
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
  OutboxExplorer,
  OutboxPublisher,
  OutboxDispatcher,
  OutboxHealthIndicator,
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
    OutboxDispatcher,
    OutboxHealthIndicator,
    OutboxRepository,
    OutboxRetentionSweeper,
    OUTBOX_OPTIONS,
  ],
})
export class OutboxModule extends ConfigurableOutboxModule {
  /** Validates right away, so a bad option fails the boot before anything connects. */
  static forRoot(options: typeof OUTBOX_OPTIONS_TYPE = {}): DynamicModule {
    // eslint-disable-next-line @typescript-eslint/no-unused-vars
    const { isGlobal, dataSource, ...outboxOptions } = options;
    resolveOutboxOptions(outboxOptions);
    return super.forRoot(options);
  }
}
