import { ConflictException, Injectable, NotFoundException } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { conflictOnUniqueViolation } from '../common/unique-violation';
import { DomainEvents } from '../events/domain-events';
import { OrganizationsQuery } from '../organizations/organizations.query';
import { Invoice } from './invoice.entity';
import type { IssueInvoiceDto } from './invoices.dto';

/** Issues and pays invoices; each change and its event commit together. */
@Injectable()
export class InvoicesService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly events: DomainEvents,
    private readonly organizations: OrganizationsQuery,
  ) {}

  issue(organizationId: string, dto: IssueInvoiceDto, requestId: string) {
    return this.dataSource
      .transaction(async (manager) => {
        if (!(await this.organizations.exists(organizationId, manager))) {
          throw new NotFoundException(`organization ${organizationId} does not exist`);
        }
        if (await manager.existsBy(Invoice, { organizationId, number: dto.number })) {
          throw new ConflictException(`invoice ${dto.number} already exists`);
        }
        const invoice = await manager.save(Invoice, {
          id: randomUUID(),
          organizationId,
          number: dto.number,
          amountCents: dto.amountCents,
          currency: dto.currency,
          status: 'issued' as const,
          paidAt: null,
        });
        const eventId = await this.events.emit(manager, {
          ...invoiceEvent('invoice.issued', invoice),
          requestId,
        });
        return { ...invoice, eventId };
      })
      .catch(conflictOnUniqueViolation(`invoice ${dto.number} already exists`));
  }

  pay(organizationId: string, invoiceId: string, requestId: string) {
    return this.dataSource.transaction(async (manager) => {
      // The row lock keeps two concurrent payments from both emitting invoice.paid.
      const invoice = await manager.findOne(Invoice, {
        where: { id: invoiceId, organizationId },
        lock: { mode: 'pessimistic_write' },
      });
      if (!invoice) throw new NotFoundException(`invoice ${invoiceId} does not exist`);
      if (invoice.status === 'paid')
        throw new ConflictException(`invoice ${invoice.number} is already paid`);
      invoice.status = 'paid';
      invoice.paidAt = new Date();
      await manager.save(invoice);
      const eventId = await this.events.emit(manager, {
        ...invoiceEvent('invoice.paid', invoice),
        requestId,
      });
      return { ...invoice, eventId };
    });
  }
}

/** An invoice event: both types carry the same payload, the invoice as it is now. */
function invoiceEvent(type: 'invoice.issued' | 'invoice.paid', invoice: Invoice) {
  return {
    type,
    aggregateType: 'invoice',
    aggregateId: invoice.id,
    organizationId: invoice.organizationId,
    payload: {
      invoiceId: invoice.id,
      number: invoice.number,
      amountCents: invoice.amountCents,
      currency: invoice.currency,
    },
  };
}
