import { Controller, Get, Query } from '@nestjs/common';
import { DataSource, type FindOptionsWhere } from 'typeorm';
import { MailLog } from './mail-log.entity';
import { Notification } from './notification.entity';
import { ListNotificationsQuery } from './notifications.dto';

/** What the fanout produced: in-app notifications, and the mail log (sent or recorded). */
@Controller()
export class NotificationsController {
  constructor(private readonly dataSource: DataSource) {}

  /** `GET /notifications?organizationId=&userId=`, newest first. */
  @Get('notifications')
  notifications(@Query() query: ListNotificationsQuery): Promise<Notification[]> {
    // TypeORM 1.x refuses `undefined` in a where: leave userId out unless it was given.
    const where: FindOptionsWhere<Notification> = { organizationId: query.organizationId };
    if (query.userId) where.userId = query.userId;
    return this.dataSource.getRepository(Notification).find({
      where,
      order: { createdAt: 'DESC', id: 'ASC' },
    });
  }

  /** `GET /mails`: every `mail_log` row, newest first. */
  @Get('mails')
  mails(): Promise<MailLog[]> {
    return this.dataSource.getRepository(MailLog).find({
      order: { createdAt: 'DESC', idempotencyKey: 'ASC' },
    });
  }
}
