import { Injectable, Logger } from '@nestjs/common';
import { OnOutboxEvent, scrubError, type HandlerContext, type OutboxEvent } from '@app/outbox';
import { catalogEntry } from '../events/event-catalog';
import { OrganizationsQuery } from '../organizations/organizations.query';
import { MailerPort } from './mailer.port';
import {
  MAILED_EVENT_TYPES,
  mailRecipients,
  NOTIFICATION_FANOUT,
  NOTIFICATION_MAIL,
} from './notification-rules';

/**
 * Mails for every catalog type whose rule names recipients. Mail leaves the database, so no
 * transaction can make it happen once: each mail is keyed by
 * `notification-fanout:<eventId>:<recipient>`, which the mailer sends once. (The key keeps the
 * name of the handler that sent mail before in-app notifications and mail were split, so an
 * event in flight across that deploy mails nobody twice.) Every recipient is tried; if any send
 * fails the handler fails and its retry sends only what is missing.
 */
@Injectable()
export class NotificationMail {
  private readonly logger = new Logger(NotificationMail.name);

  constructor(
    private readonly organizations: OrganizationsQuery,
    private readonly mailer: MailerPort,
  ) {}

  @OnOutboxEvent(NOTIFICATION_MAIL, { events: MAILED_EVENT_TYPES })
  async handle(event: OutboxEvent, ctx: HandlerContext): Promise<void> {
    const rule = catalogEntry(event.type)?.notification;
    if (!rule || !event.organizationId) return;
    const organizationId = event.organizationId;
    const members = await this.organizations.membersAsOf(organizationId, event.occurredAt);
    const title = rule.title(event.payload as never);
    const recipients = mailRecipients(rule.mail, members, event.payload);
    const failures: unknown[] = [];
    for (const to of recipients) {
      ctx.signal.throwIfAborted();
      try {
        await this.mailer.send({
          organizationId,
          to,
          subject: title,
          text: `${title}\n\nOrganization: ${organizationId}\nEvent: ${event.type} ${event.id}\n`,
          idempotencyKey: `${NOTIFICATION_FANOUT}:${event.id}:${to}`,
        });
      } catch (error) {
        this.logger.warn(`Mail for ${event.type} ${event.id} failed: ${scrubError(error)}`);
        failures.push(error);
      }
    }
    if (failures.length === 1) throw failures[0];
    if (failures.length > 1) {
      throw new AggregateError(
        failures,
        `${failures.length} of ${recipients.length} mails failed, first: ${scrubError(failures[0])}`,
      );
    }
  }
}
