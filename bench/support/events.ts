import type { NewOutboxEvent, OutboxEvent } from '../../libs/outbox/src';

/** An event as the producers emit it; `payload.i` is its index, which picks its handler time. */
export function sampleEvent(i: number): NewOutboxEvent {
  return {
    type: 'invoice.paid',
    aggregateType: 'invoice',
    aggregateId: `inv-${i}`,
    organizationId: 'org-1',
    requestId: `req-${i}`,
    payload: { i, invoiceId: `inv-${i}`, amountCents: 12_500, currency: 'EUR' },
  };
}

/** The index an event was emitted or inserted with; -1 when it has none. */
export function eventIndex(event: OutboxEvent): number {
  const i = (event.payload as { i?: unknown } | null)?.i;
  return typeof i === 'number' ? i : -1;
}

/**
 * The mixed handler times, chosen by index so every run is the same: of each 100 indexes, one
 * takes 500 ms (99), nine take 20 ms (10, 21, ..., 98) and ninety take 2 ms.
 */
export function mixedDelayMs(i: number): number {
  const k = ((i % 100) + 100) % 100;
  if (k === 99) return 500;
  if (k % 11 === 10) return 20;
  return 2;
}

/** 0.9 * 2 + 0.09 * 20 + 0.01 * 500 */
export const MIXED_MEAN_MS = 8.6;

/**
 * The emitted row of event `i`, written by hand into `outbox_bare` (same shape as outbox_event):
 * the baseline of the producer figures.
 */
export function bareInsert(
  manager: { query(sql: string, parameters: unknown[]): Promise<unknown> },
  i: number,
): Promise<unknown> {
  const e = sampleEvent(i);
  return manager.query(
    `INSERT INTO outbox_bare
       (id, type, aggregate_type, aggregate_id, organization_id, request_id, payload, metadata)
     VALUES (gen_random_uuid(), $1, $2, $3, $4, $5, $6, $7)`,
    [
      e.type,
      e.aggregateType,
      e.aggregateId,
      e.organizationId,
      e.requestId,
      JSON.stringify(e.payload),
      '{}',
    ],
  );
}
