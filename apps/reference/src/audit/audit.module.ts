import { Module } from '@nestjs/common';
import { AuditController } from './audit.controller';
import { AuditLogHandler } from './audit-log.handler';
import { AuditService } from './audit.service';

/** The `audit-log` handler (every event, hash-chained) and `GET /audit`, `GET /audit/verify`. */
@Module({
  controllers: [AuditController],
  providers: [AuditLogHandler, AuditService],
  exports: [AuditService],
})
export class AuditModule {}
