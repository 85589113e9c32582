import { Global, Module } from '@nestjs/common';
import { DomainEvents } from './domain-events';

/** The catalog-checked publisher every domain module emits through. */
@Global()
@Module({ providers: [DomainEvents], exports: [DomainEvents] })
export class EventsModule {}
