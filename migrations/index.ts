import { OUTBOX_MIGRATIONS } from '@app/outbox';
import { CreateReferenceApp1764500000000 } from './1764500000000-create-reference-app';
import { WebhooksOnOutbox1766500000000 } from './1766500000000-webhooks-on-outbox';
import { MailLogOrganization1771100001000 } from '../apps/reference/src/notifications/migrations/1771100001000-mail-log-organization';
import { OrganizationApiKey1771100000000 } from '../apps/reference/src/organizations/migrations/1771100000000-organization-api-key';

/**
 * The reference app's own tables; they run after the outbox's (`OUTBOX_MIGRATIONS`, from the
 * library's package entry, as an app imports them from `nestjs-lease-outbox`).
 *
 * The migrations listed here stay in this folder: they have run. From now on each app module adds
 * the migrations of its own tables in its own folder (`apps/reference/src/<module>/migrations/`,
 * for example `apps/reference/src/webhooks/migrations/`) and lists them at the end of this list,
 * in timestamp order.
 */
export const REFERENCE_APP_MIGRATIONS = [
  CreateReferenceApp1764500000000,
  WebhooksOnOutbox1766500000000,
  OrganizationApiKey1771100000000,
  MailLogOrganization1771100001000,
];

export { OUTBOX_MIGRATIONS, CreateReferenceApp1764500000000, WebhooksOnOutbox1766500000000 };
export {
  CreateOutboxEvent1764400000000,
  OutboxDueIndex1765000000000,
  OutboxEventCausation1766000000000,
  OutboxHandlerFailures1767000000000,
  OutboxDiscard1768000000000,
  OutboxDispatcherReports1769000000000,
  OutboxOrganizationTypeIndex1770000000000,
  OutboxAdminChange1771000000000,
} from '@app/outbox';
