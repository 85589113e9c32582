import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { EventDispatcher } from './event.dispatcher';
import { ScopedOutboxHandlerError, UnreachableOutboxHandlerError } from '../outbox.errors';
import type { OutboxHandlerFn } from './outbox-handler.types';
import { OutboxMetadataAccessor } from './outbox-metadata.accessor';
import type { OutboxHandlerMetadata } from './outbox.decorators';
import { OutboxMessages } from '../outbox.messages';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { OUTBOX_OPTIONS } from '../outbox.tokens';

type Prototype = Record<string, unknown>;

/**
 * Finds every `@OnOutboxEvent` method in the application at boot, on class, factory and value
 * providers and on controllers, and registers it with the `EventDispatcher`, so a misnamed,
 * duplicated, scoped or unreachable handler fails the boot, not a delivery.
 */
@Injectable()
export class OutboxExplorer implements OnModuleInit {
  private readonly logger = new Logger('Outbox');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly accessor: OutboxMetadataAccessor,
    private readonly dispatcher: EventDispatcher,
    @Inject(OUTBOX_OPTIONS) private readonly options: Pick<ResolvedOutboxOptions, 'types'>,
  ) {}

  onModuleInit(): void {
    const wrappers = [...this.discovery.getProviders(), ...this.discovery.getControllers()];
    // One instance can sit behind several tokens (useExisting, a value registered twice):
    // its handlers are registered once.
    const explored = new Set<unknown>();
    for (const wrapper of wrappers) this.explore(wrapper, explored);
    this.dispatcher.assertOverridesUsed();
    const summary = this.dispatcher.describe();
    this.logger.log(
      summary.length === 0
        ? 'No @OnOutboxEvent handler found: every event is marked delivered without running anything'
        : `Outbox handlers: ${summary.join('; ')}`,
    );
    this.reportUnclaimedTypes();
  }

  /**
   * With a `types` filter, this instance claims only those types: a handler here subscribed to
   * another type never runs here (it runs wherever that type is claimed), which is worth saying
   * at boot rather than finding out from a backlog. Dead announcements are the usual case.
   */
  private reportUnclaimedTypes(): void {
    const { types } = this.options;
    if (!types) return;
    const claimed = new Set(types);
    for (const { type, handlers } of this.dispatcher.subscriptions()) {
      if (type === '*' || claimed.has(type)) continue;
      this.logger.warn(OutboxMessages.unclaimedType(type, handlers, types));
    }
  }

  private explore(wrapper: InstanceWrapper, explored: Set<unknown>): void {
    const declared = this.declaredPrototype(wrapper);
    const instance = wrapper.instance as Prototype | undefined | null;
    const static_ = wrapper.isDependencyTreeStatic() && !wrapper.isTransient;
    // A factory or value provider declares nothing: what it returns is the handler's host.
    const running =
      static_ && instance && typeof instance === 'object'
        ? (Object.getPrototypeOf(instance) as Prototype | null)
        : undefined;
    const prototype = running ?? declared;
    if (!prototype) return;
    const handlers = this.handlersOn(prototype);
    if (handlers.length === 0) return;
    const className = nameOf(prototype, wrapper);
    if (!static_) {
      throw new ScopedOutboxHandlerError(handlers[0].metadata.name, location(className, handlers));
    }
    if (!running || !instance) {
      throw new UnreachableOutboxHandlerError(
        handlers[0].metadata.name,
        location(className, handlers),
      );
    }
    if (explored.has(instance)) return;
    explored.add(instance);
    for (const { methodName, metadata } of handlers) {
      this.dispatcher.register({
        name: metadata.name,
        events: metadata.events,
        timeoutMs: metadata.timeoutMs,
        transaction: metadata.transaction,
        retry: metadata.retry,
        maxAttempts: metadata.maxAttempts,
        ordered: metadata.ordered,
        maxConcurrent: metadata.maxConcurrent,
        rate: metadata.rate,
        limitPerPartition: metadata.limitPerPartition,
        handle: (event, context) =>
          (instance[methodName] as OutboxHandlerFn).call(instance, event, context),
        location: `${className}.${methodName}`,
      });
    }
  }

  /** The class a provider declares, when it is a class provider (not a factory). */
  private declaredPrototype(wrapper: InstanceWrapper): Prototype | undefined {
    const metatype: unknown = wrapper.metatype;
    // With `inject`, the metatype is the factory function, whose prototype holds nothing.
    if (typeof metatype !== 'function' || wrapper.inject) return undefined;
    const prototype: unknown = (metatype as { prototype?: unknown }).prototype;
    return prototype && typeof prototype === 'object' ? (prototype as Prototype) : undefined;
  }

  private handlersOn(
    prototype: Prototype,
  ): Array<{ methodName: string; metadata: OutboxHandlerMetadata }> {
    const found: Array<{ methodName: string; metadata: OutboxHandlerMetadata }> = [];
    for (const methodName of this.scanner.getAllMethodNames(prototype)) {
      const method = prototype[methodName] as (...args: unknown[]) => unknown;
      const metadata = this.accessor.getHandlerMetadata(method);
      if (metadata) found.push({ methodName, metadata });
    }
    return found;
  }
}

function nameOf(prototype: Prototype, wrapper: InstanceWrapper): string {
  const ctor = prototype.constructor as { name?: unknown } | undefined;
  return typeof ctor?.name === 'string' && ctor.name !== '' ? ctor.name : String(wrapper.name);
}

function location(className: string, handlers: Array<{ methodName: string }>): string {
  return `${className}.${handlers[0].methodName}`;
}
