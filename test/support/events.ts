import { randomUUID } from 'node:crypto';
import { OUTBOX_EVENT_DEAD, type NewOutboxEvent, type OutboxEventDeadPayload } from '@app/outbox';

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

/** A `member.invited` event of member `m-1` with an empty payload, unless overridden. */
export function memberInvited(overrides: Partial<NewOutboxEvent> = {}): NewOutboxEvent {
  return {
    type: 'member.invited',
    aggregateType: 'member',
    aggregateId: 'm-1',
    payload: {},
    ...overrides,
  };
}

/**
 * The `outbox.event.dead` announcement of an event of `type` on an `aggregateType` that failed
 * for good after 10 attempts, `handler` last throwing `error`; `envelope` sets its organization
 * and request. Its aggregate is the dead event, as when the outbox emits one.
 */
export function deadAnnouncement(
  dead: { eventId: string; type: string; aggregateType: string; handler: string; error: string },
  envelope: Pick<NewOutboxEvent, 'organizationId' | 'requestId'> = {},
): NewOutboxEvent<OutboxEventDeadPayload> {
  return {
    type: OUTBOX_EVENT_DEAD,
    aggregateType: 'outbox_event',
    aggregateId: dead.eventId,
    ...envelope,
    payload: {
      eventId: dead.eventId,
      type: dead.type,
      aggregateType: dead.aggregateType,
      aggregateId: randomUUID(),
      attempts: 10,
      failedHandlers: [dead.handler],
      lastError: `${dead.handler}: ${dead.error}`,
    },
  };
}

/**
 * One event of `type` per aggregate id, on the aggregate named by the type's first word, with
 * `payload(aggregateId)` as payload (empty by default).
 */
export function eventsOn(
  type: string,
  aggregateIds: readonly string[],
  payload: (aggregateId: string) => unknown = () => ({}),
): NewOutboxEvent[] {
  return aggregateIds.map((aggregateId) => ({
    type,
    aggregateType: type.split('.')[0],
    aggregateId,
    payload: payload(aggregateId),
  }));
}

/** An `account.credited` event of `account` carrying `n`. */
export function accountCredited(account: string, n: number): NewOutboxEvent<{ n: number }> {
  return {
    type: 'account.credited',
    aggregateType: 'account',
    aggregateId: account,
    payload: { n },
  };
}
