import { CreateOutboxEvent1764400000000 } from './1764400000000-create-outbox-event';
import { OutboxDueIndex1765000000000 } from './1765000000000-outbox-due-index';
import { OutboxEventCausation1766000000000 } from './1766000000000-outbox-event-causation';
import { OutboxHandlerFailures1767000000000 } from './1767000000000-outbox-handler-failures';
import { OutboxDiscard1768000000000 } from './1768000000000-outbox-discard';
import { OutboxDiscardIndexes1768500000000 } from './1768500000000-outbox-discard-indexes';
import { OutboxDispatcherReports1769000000000 } from './1769000000000-outbox-dispatcher';
import { OutboxOrganizationTypeIndex1770000000000 } from './1770000000000-outbox-organization-type-index';
import { OutboxAdminChange1771000000000 } from './1771000000000-outbox-admin-change';
import { OutboxClaimFunction1772000000000 } from './1772000000000-outbox-claim-function';
import { OutboxOrdering1773000000000 } from './1773000000000-outbox-ordering';
import { OutboxOrderingIndexes1773500000000 } from './1773500000000-outbox-ordering-indexes';

/**
 * The outbox's migrations, in order: add them to your DataSource's `migrations`, with
 * `migrationsTransactionMode: 'each'` (those that build indexes concurrently run outside a
 * transaction, which TypeORM's default, 'all', refuses).
 */
export const OUTBOX_MIGRATIONS = [
  CreateOutboxEvent1764400000000,
  OutboxDueIndex1765000000000,
  OutboxEventCausation1766000000000,
  OutboxHandlerFailures1767000000000,
  OutboxDiscard1768000000000,
  OutboxDiscardIndexes1768500000000,
  OutboxDispatcherReports1769000000000,
  OutboxOrganizationTypeIndex1770000000000,
  OutboxAdminChange1771000000000,
  OutboxClaimFunction1772000000000,
  OutboxOrdering1773000000000,
  OutboxOrderingIndexes1773500000000,
];

export {
  CreateOutboxEvent1764400000000,
  OutboxDueIndex1765000000000,
  OutboxEventCausation1766000000000,
  OutboxHandlerFailures1767000000000,
  OutboxDiscard1768000000000,
  OutboxDiscardIndexes1768500000000,
  OutboxDispatcherReports1769000000000,
  OutboxOrganizationTypeIndex1770000000000,
  OutboxAdminChange1771000000000,
  OutboxClaimFunction1772000000000,
  OutboxOrdering1773000000000,
  OutboxOrderingIndexes1773500000000,
};
