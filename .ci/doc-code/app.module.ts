// The reader's AppModule, as the testing guide's example has it: options of the outbox passed in,
// so that a test can swap them for outboxTestingOptions.
import type { DynamicModule } from '@nestjs/common';
import type { OutboxModuleOptions } from 'nestjs-lease-outbox';

export declare class AppModule {
  static forRoot(options: {
    outbox?: (options?: OutboxModuleOptions) => OutboxModuleOptions;
  }): DynamicModule;
}
