import type { NewOutboxEvent } from '@app/outbox';

/** An `invoice.paid` event with every optional field set, for tests that need any valid event. */
export function invoicePaid(overrides: Partial<NewOutboxEvent> = {}): NewOutboxEvent {
  return {
    type: 'invoice.paid',
    aggregateType: 'invoice',
    aggregateId: 'inv-1',
    organizationId: 'org-1',
    requestId: 'req-1',
    payload: { amount: 100 },
    ...overrides,
  };
}
