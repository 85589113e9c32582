import { OUTBOX_MIGRATIONS } from '../libs/outbox/src/migrations';
import { CreateOutboxEvent1764400000000 } from './1764400000000-create-outbox-event';
import { CreateReferenceApp1764500000000 } from './1764500000000-create-reference-app';
import { WebhooksOnOutbox1766500000000 } from './1766500000000-webhooks-on-outbox';
import { OutboxDueIndex1765000000000 } from '../libs/outbox/src/migrations/1765000000000-outbox-due-index';
import { OutboxEventCausation1766000000000 } from '../libs/outbox/src/migrations/1766000000000-outbox-event-causation';
import { OutboxHandlerFailures1767000000000 } from '../libs/outbox/src/migrations/1767000000000-outbox-handler-failures';
import { OutboxDiscard1768000000000 } from '../libs/outbox/src/migrations/1768000000000-outbox-discard';
import { OutboxDispatcherReports1769000000000 } from '../libs/outbox/src/migrations/1769000000000-outbox-dispatcher';

/** The reference app's own tables; they run after the outbox's. */
export const REFERENCE_APP_MIGRATIONS = [
  CreateReferenceApp1764500000000,
  WebhooksOnOutbox1766500000000,
];

export {
  OUTBOX_MIGRATIONS,
  CreateOutboxEvent1764400000000,
  OutboxDueIndex1765000000000,
  OutboxEventCausation1766000000000,
  OutboxHandlerFailures1767000000000,
  OutboxDiscard1768000000000,
  OutboxDispatcherReports1769000000000,
  CreateReferenceApp1764500000000,
  WebhooksOnOutbox1766500000000,
};
