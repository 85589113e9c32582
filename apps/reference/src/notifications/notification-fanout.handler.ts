import { Injectable, Logger } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OnOutboxEvent, scrubError, type HandlerContext, type OutboxEvent } from '@app/outbox';
import { catalogEntry, type NotificationRule } from '../events/event-catalog';
import { OrganizationsQuery } from '../organizations/organizations.query';
import { MailerPort } from './mailer.port';
import {
  audienceMembers,
  mailRecipients,
  NOTIFICATION_FANOUT,
  NOTIFIED_EVENT_TYPES,
  notificationDedupKey,
  type Recipient,
} from './notification-rules';

/**
 * In-app notifications and mails for every catalog type whose rule names someone. Safe to run
 * again for the same event: notifications are unique per `(user_id, dedup_key)` and each mail
 * is keyed by `notification-fanout:<eventId>:<recipient>`, which the mailer sends once.
 */
@Injectable()
export class NotificationFanout {
  private readonly logger = new Logger(NotificationFanout.name);

  constructor(
    private readonly dataSource: DataSource,
    private readonly mailer: MailerPort,
    private readonly organizations: OrganizationsQuery,
  ) {}

  @OnOutboxEvent(NOTIFICATION_FANOUT, { events: NOTIFIED_EVENT_TYPES })
  async handle(event: OutboxEvent, ctx: HandlerContext): Promise<void> {
    const rule = catalogEntry(event.type)?.notification;
    // Notifications belong to an organization; an event without one has nobody to tell.
    if (!rule || !event.organizationId) return;
    const title = rule.title(event.payload as never);
    const members = await this.notify(event, event.organizationId, rule, title);
    await this.mail(event, event.organizationId, rule, title, members, ctx);
  }

  /**
   * One short transaction: the organization's members as of the event (so a redelivery does not
   * reach people who joined later), and the audience's notifications, a duplicate dropped.
   */
  private notify(
    event: OutboxEvent,
    organizationId: string,
    rule: NotificationRule,
    title: string,
  ): Promise<Recipient[]> {
    return this.dataSource.transaction(async (manager) => {
      const members: Recipient[] = await this.organizations.membersAsOf(
        organizationId,
        event.occurredAt,
        manager,
      );
      const audience = audienceMembers(rule.audience, members);
      if (audience.length > 0) {
        await manager.query(
          `INSERT INTO notification
             (id, user_id, organization_id, event_id, event_type, title, dedup_key)
           SELECT gen_random_uuid(), user_id, $2, $3, $4, $5, $6
           FROM unnest($1::uuid[]) AS user_id
           ON CONFLICT (user_id, dedup_key) DO NOTHING`,
          [
            audience.map((m) => m.id),
            organizationId,
            event.id,
            event.type,
            title,
            notificationDedupKey(event, rule),
          ],
        );
      }
      return members;
    });
  }

  /**
   * Outside any transaction. Every recipient is tried; if any send fails the handler fails and
   * the retry sends only what is missing, since sent keys are skipped.
   */
  private async mail(
    event: OutboxEvent,
    organizationId: string,
    rule: NotificationRule,
    title: string,
    members: readonly Recipient[],
    ctx: HandlerContext,
  ): Promise<void> {
    const recipients = mailRecipients(rule.mail, members, event.payload);
    const failures: unknown[] = [];
    for (const to of recipients) {
      ctx.signal.throwIfAborted();
      try {
        await this.mailer.send({
          to,
          subject: title,
          text: `${title}\n\nOrganization: ${organizationId}\nEvent: ${event.type} ${event.id}\n`,
          idempotencyKey: `${ctx.idempotencyKey}:${to}`,
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
