import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent, type TransactionalHandlerContext } from '@app/outbox';
import { catalogEntry } from '../events/event-catalog';
import { OrganizationsQuery } from '../organizations/organizations.query';
import {
  audienceMembers,
  NOTIFICATION_FANOUT,
  NOTIFIED_EVENT_TYPES,
  notificationDedupKey,
} from './notification-rules';

/**
 * In-app notifications for every catalog type whose rule names an audience. A transactional
 * handler: the notifications and the outbox's record that this handler ran commit together, so
 * each event notifies its audience exactly once. Notifications stay unique per
 * `(user_id, dedup_key)` all the same: that is how events of one aggregate within a dedup
 * window collapse into the first one's notification.
 */
@Injectable()
export class NotificationFanout {
  constructor(private readonly organizations: OrganizationsQuery) {}

  @OnOutboxEvent(NOTIFICATION_FANOUT, { events: NOTIFIED_EVENT_TYPES, transaction: true })
  async handle(event: OutboxEvent, ctx: TransactionalHandlerContext): Promise<void> {
    const rule = catalogEntry(event.type)?.notification;
    // Notifications belong to an organization; an event without one has nobody to tell.
    if (!rule || !event.organizationId) return;
    // As of the event, so a redelivery does not reach people who joined later.
    const members = await this.organizations.membersAsOf(
      event.organizationId,
      event.occurredAt,
      ctx.manager,
    );
    const audience = audienceMembers(rule.audience, members);
    if (audience.length === 0) return;
    await ctx.manager.query(
      `INSERT INTO notification
         (id, user_id, organization_id, event_id, event_type, title, dedup_key)
       SELECT gen_random_uuid(), user_id, $2, $3, $4, $5, $6
       FROM unnest($1::uuid[]) AS user_id
       ON CONFLICT (user_id, dedup_key) DO NOTHING`,
      [
        audience.map((m) => m.id),
        event.organizationId,
        event.id,
        event.type,
        rule.title(event.payload as never),
        notificationDedupKey(event, rule),
      ],
    );
  }
}
