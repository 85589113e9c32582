import { Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { OUTBOX_HANDLER_METADATA, type OutboxHandlerMetadata } from './outbox.decorators';

/** Reads what `@OnOutboxEvent` left on a method. */
@Injectable()
export class OutboxMetadataAccessor {
  constructor(private readonly reflector: Reflector) {}

  getHandlerMetadata(target: (...args: unknown[]) => unknown): OutboxHandlerMetadata | undefined {
    return this.reflector.get<OutboxHandlerMetadata | undefined>(OUTBOX_HANDLER_METADATA, target);
  }
}
