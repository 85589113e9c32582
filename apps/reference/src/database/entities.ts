import { OUTBOX_ENTITIES } from '@app/outbox';
import { AuditEntry } from '../audit/audit-entry.entity';
import { Invoice } from '../invoices/invoice.entity';
import { MailLog } from '../notifications/mail-log.entity';
import { Notification } from '../notifications/notification.entity';
import { Member } from '../organizations/member.entity';
import { Organization } from '../organizations/organization.entity';
import { WebhookEndpoint } from '../webhooks/webhook-endpoint.entity';

export const APP_ENTITIES = [
  ...OUTBOX_ENTITIES,
  Organization,
  Member,
  Invoice,
  AuditEntry,
  WebhookEndpoint,
  Notification,
  MailLog,
];
