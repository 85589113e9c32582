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

/**
 * An event of `type` in `organizationId`, on the aggregate named by the type's first word
 * (`invoice` for `invoice.paid`) with id `agg-<payload.n>`.
 */
export function numberedEvent<P extends { n: number }>(
  type: string,
  payload: P,
  organizationId: string,
): NewOutboxEvent<P> {
  return {
    type,
    aggregateType: type.split('.')[0],
    aggregateId: `agg-${payload.n}`,
    organizationId,
    payload,
  };
}
