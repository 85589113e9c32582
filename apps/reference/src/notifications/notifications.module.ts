import { Logger, Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { DataSource } from 'typeorm';
import type { AppConfig } from '../config/app.config';
import { MailerPort } from './mailer.port';
import { NotificationFanout } from './notification-fanout.handler';
import { NotificationMail } from './notification-mail.handler';
import { NotificationsController } from './notifications.controller';
import { RecordingMailer } from './recording.mailer';
import { SmtpMailer } from './smtp.mailer';
import { OrganizationsModule } from '../organizations/organizations.module';

/** The adapter behind MailerPort, chosen once at boot from `SMTP_URL`. */
function createMailer(config: ConfigService<AppConfig, true>, dataSource: DataSource): MailerPort {
  const url = config.get('SMTP_URL', { infer: true });
  if (url) {
    return new SmtpMailer(dataSource, { url, from: config.get('MAIL_FROM', { infer: true }) });
  }
  new Logger('NotificationsModule').log('SMTP_URL is not set: mails are recorded in mail_log');
  return new RecordingMailer(dataSource);
}

/**
 * The catalog's notification rules as two outbox handlers, `notification-fanout` (in-app,
 * transactional) and `notification-mail` (mail, keyed for idempotency), the mailer, and
 * `GET /notifications` and `GET /mails`.
 */
@Module({
  imports: [OrganizationsModule],
  controllers: [NotificationsController],
  providers: [
    NotificationFanout,
    NotificationMail,
    { provide: MailerPort, inject: [ConfigService, DataSource], useFactory: createMailer },
  ],
  exports: [MailerPort],
})
export class NotificationsModule {}
