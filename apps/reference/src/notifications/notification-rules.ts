import type { OutboxEvent } from '@app/outbox';
import {
  catalogEntry,
  EVENT_TYPES,
  type Audience,
  type NotificationRule,
} from '../events/event-catalog';
import type { MemberView } from '../organizations/organizations.query';

/** Persisted handler names; renaming one makes a new handler (see the outbox README). */
export const NOTIFICATION_FANOUT = 'notification-fanout';
export const NOTIFICATION_MAIL = 'notification-mail';

/** Catalog types that notify someone in-app (`outbox.event.dead` included). */
export const NOTIFIED_EVENT_TYPES: readonly string[] = EVENT_TYPES.filter(
  (type) => (catalogEntry(type)?.notification.audience ?? 'none') !== 'none',
);

/** Catalog types that mail someone. */
export const MAILED_EVENT_TYPES: readonly string[] = EVENT_TYPES.filter(
  (type) => (catalogEntry(type)?.notification.mail ?? 'none') !== 'none',
);

export type Recipient = MemberView;

/**
 * The notification's dedup key, unique per user: `event:<eventId>` (a redelivery inserts
 * nothing new), or with a dedup window `<type>:<aggregateId>:<window number>`, so events of one
 * aggregate within the same window collapse into the first one's notification.
 */
export function notificationDedupKey(
  event: Pick<OutboxEvent, 'id' | 'type' | 'aggregateId' | 'occurredAt'>,
  rule: Pick<NotificationRule, 'dedupWindowMs'>,
): string {
  const window = rule.dedupWindowMs;
  if (!window) return `event:${event.id}`;
  return `${event.type}:${event.aggregateId}:${Math.floor(event.occurredAt.getTime() / window)}`;
}

/** The members an audience names: `admins` (role admin), `members` (all of them), `none`. */
export function audienceMembers(audience: Audience, members: readonly Recipient[]): Recipient[] {
  if (audience === 'members') return [...members];
  if (audience === 'admins') return members.filter((m) => m.role === 'admin');
  return [];
}

/** Addresses a rule's `mail` names, lowercased and each once; `invitee` is `payload.email`. */
export function mailRecipients(
  mail: NotificationRule['mail'],
  members: readonly Recipient[],
  payload: unknown,
): string[] {
  const addresses =
    mail === 'invitee'
      ? [(payload as { email?: unknown } | null)?.email].filter(
          (email): email is string => typeof email === 'string' && email.length > 0,
        )
      : audienceMembers(mail, members).map((m) => m.email);
  return [...new Set(addresses.map((address) => address.toLowerCase()))];
}
