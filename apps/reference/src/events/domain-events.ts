import { BadRequestException, Injectable } from '@nestjs/common';
import { plainToInstance } from 'class-transformer';
import { validateSync } from 'class-validator';
import type { EntityManager } from 'typeorm';
import { OutboxPublisher } from '@app/outbox';
import { catalogEntry, type EventType } from './event-catalog';

export interface DomainEvent {
  type: EventType;
  aggregateType: string;
  aggregateId: string;
  organizationId: string;
  requestId: string;
  payload: object;
}

/**
 * Emits catalog events inside the caller's transaction, after checking the payload against
 * the catalog's class: a payload that does not match is a 400 and nothing is written.
 */
@Injectable()
export class DomainEvents {
  constructor(private readonly outbox: OutboxPublisher) {}

  async emit(manager: EntityManager, event: DomainEvent): Promise<string> {
    const entry = catalogEntry(event.type);
    if (!entry) throw new BadRequestException(`unknown event type ${event.type}`);
    if (entry.payload) {
      const errors = validateSync(plainToInstance(entry.payload, event.payload), {
        whitelist: true,
        forbidNonWhitelisted: true,
      });
      if (errors.length > 0) {
        throw new BadRequestException(
          errors.map(
            (e) => `payload.${e.property}: ${Object.values(e.constraints ?? {}).join('; ')}`,
          ),
        );
      }
    }
    return this.outbox.emit(event, { manager });
  }
}
