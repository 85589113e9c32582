import { Controller, Get, Query } from '@nestjs/common';
import { ListAuditQuery } from './audit.dto';
import { AuditService } from './audit.service';

/** The audit log: entries newest first, and a check of the whole hash chain. */
@Controller('audit')
export class AuditController {
  constructor(private readonly audit: AuditService) {}

  /** `{ entries }`, newest (highest `seq`) first; `?organizationId=` and `?limit=` narrow it. */
  @Get()
  async list(@Query() query: ListAuditQuery) {
    return { entries: await this.audit.list(query) };
  }

  /** `{ valid: true, entries }`, or the first broken link. */
  @Get('verify')
  verify() {
    return this.audit.verify();
  }
}
