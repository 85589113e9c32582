import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import { DataSource, type FindOptionsWhere } from 'typeorm';
import { CurrentOrganization } from '../auth/current-organization';
import { OrganizationKeyGuard } from '../auth/organization-key.guard';
import { MailLog } from './mail-log.entity';
import { Notification } from './notification.entity';
import { ListNotificationsQuery } from './notifications.dto';

/**
 * What the fanout produced for the organization of the API key: in-app notifications, and the
 * mail log (sent or recorded).
 */
@Controller()
@UseGuards(OrganizationKeyGuard)
export class NotificationsController {
  constructor(private readonly dataSource: DataSource) {}

  /** `GET /notifications?userId=`, newest first. */
  @Get('notifications')
  notifications(
    @CurrentOrganization() organizationId: string,
    @Query() query: ListNotificationsQuery,
  ): Promise<Notification[]> {
    // TypeORM 1.x refuses `undefined` in a where: leave userId out unless it was given.
    const where: FindOptionsWhere<Notification> = { organizationId };
    if (query.userId) where.userId = query.userId;
    return this.dataSource.getRepository(Notification).find({
      where,
      order: { createdAt: 'DESC', id: 'ASC' },
    });
  }

  /** `GET /mails`: the organization's `mail_log` rows, newest first. */
  @Get('mails')
  mails(@CurrentOrganization() organizationId: string): Promise<MailLog[]> {
    return this.dataSource.getRepository(MailLog).find({
      where: { organizationId },
      order: { createdAt: 'DESC', idempotencyKey: 'ASC' },
    });
  }
}
