import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import { CurrentOrganization } from '../auth/current-organization';
import { OperatorGuard } from '../auth/operator.guard';
import { OrganizationKeyGuard } from '../auth/organization-key.guard';
import { ListAuditQuery } from './audit.dto';
import { AuditService } from './audit.service';

/** The audit log: an organization's entries, and (for operators) a check of the whole chain. */
@Controller('audit')
export class AuditController {
  constructor(private readonly audit: AuditService) {}

  /** `{ entries }` of the API key's organization, newest (highest `seq`) first; `?limit=`. */
  @Get()
  @UseGuards(OrganizationKeyGuard)
  async list(@CurrentOrganization() organizationId: string, @Query() query: ListAuditQuery) {
    return { entries: await this.audit.list(organizationId, query) };
  }

  /**
   * `{ valid: true, entries }`, or the first broken link. The chain runs through every
   * organization's entries, so only operators check it.
   */
  @Get('verify')
  @UseGuards(OperatorGuard)
  verify() {
    return this.audit.verify();
  }
}
