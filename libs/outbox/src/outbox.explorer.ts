import { Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { EventDispatcher } from './event-dispatcher';
import { ScopedOutboxHandlerError } from './outbox.errors';
import type { OutboxHandlerFn } from './outbox-handler.types';
import { OutboxMetadataAccessor } from './outbox-metadata.accessor';

/**
 * Finds every `@OnOutboxEvent` method in the application at boot and registers it with the
 * `EventDispatcher`, so a misnamed, duplicated or scoped handler fails the boot, not a delivery.
 */
@Injectable()
export class OutboxExplorer implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly accessor: OutboxMetadataAccessor,
    private readonly dispatcher: EventDispatcher,
  ) {}

  onModuleInit(): void {
    for (const wrapper of this.discovery.getProviders()) this.explore(wrapper);
  }

  private explore(wrapper: InstanceWrapper): void {
    const instance: unknown = wrapper.instance;
    const metatype = wrapper.metatype;
    if (!metatype || typeof metatype !== 'function') return;
    const prototype = metatype.prototype as Record<string, unknown> | undefined;
    if (!prototype || typeof prototype !== 'object') return;
    for (const methodName of this.scanner.getAllMethodNames(prototype)) {
      const method = prototype[methodName] as (...args: unknown[]) => unknown;
      const metadata = this.accessor.getHandlerMetadata(method);
      if (!metadata) continue;
      const location = `${metatype.name}.${methodName}`;
      if (!wrapper.isDependencyTreeStatic() || wrapper.isTransient) {
        throw new ScopedOutboxHandlerError(metadata.name, location);
      }
      const target = instance as Record<string, OutboxHandlerFn>;
      this.dispatcher.register({
        name: metadata.name,
        events: metadata.events,
        handle: (event, context) => target[methodName](event, context),
        location,
      });
    }
  }
}
