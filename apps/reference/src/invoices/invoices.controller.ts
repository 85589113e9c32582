import { Body, Controller, Param, ParseUUIDPipe, Post, UseGuards } from '@nestjs/common';
import { OrganizationKeyGuard } from '../auth/organization-key.guard';
import { RequestId } from '../common/request-id';
import { IssueInvoiceDto } from './invoices.dto';
import { InvoicesService } from './invoices.service';

/** An organization's invoices, with its API key. */
@Controller('organizations/:organizationId/invoices')
@UseGuards(OrganizationKeyGuard)
export class InvoicesController {
  constructor(private readonly invoices: InvoicesService) {}

  @Post()
  issue(
    @Param('organizationId', ParseUUIDPipe) organizationId: string,
    @Body() dto: IssueInvoiceDto,
    @RequestId() requestId: string,
  ) {
    return this.invoices.issue(organizationId, dto, requestId);
  }

  @Post(':invoiceId/pay')
  pay(
    @Param('organizationId', ParseUUIDPipe) organizationId: string,
    @Param('invoiceId', ParseUUIDPipe) invoiceId: string,
    @RequestId() requestId: string,
  ) {
    return this.invoices.pay(organizationId, invoiceId, requestId);
  }
}
