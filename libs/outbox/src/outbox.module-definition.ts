import { ConfigurableModuleBuilder } from '@nestjs/common';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { OutboxModuleOptions } from './outbox.options';
import { OUTBOX_DATA_SOURCE } from './outbox.tokens';

/** Settings needed while the module is being defined, before any options factory has run. */
export interface OutboxModuleExtras {
  /** Register the module globally, so every module can inject `OutboxPublisher`. Default true. */
  isGlobal?: boolean;
  /** Name of the TypeORM DataSource the outbox table lives in (as given to TypeOrmModule). */
  dataSource?: string;
}

export const {
  ConfigurableModuleClass: ConfigurableOutboxModule,
  MODULE_OPTIONS_TOKEN: OUTBOX_MODULE_OPTIONS,
  OPTIONS_TYPE: OUTBOX_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: OUTBOX_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<OutboxModuleOptions>()
  .setClassMethodName('forRoot')
  .setExtras<OutboxModuleExtras>(
    { isGlobal: true, dataSource: undefined },
    (definition, extras) => ({
      ...definition,
      global: extras.isGlobal,
      providers: [
        ...(definition.providers ?? []),
        // Injected by token, so Nest waits for TypeORM's asynchronous DataSource to be ready.
        { provide: OUTBOX_DATA_SOURCE, useExisting: getDataSourceToken(extras.dataSource) },
      ],
    }),
  )
  .build();
