import { EventDispatcher } from './event-dispatcher';
import type { OutboxEvent } from './outbox-handler.types';

const event: OutboxEvent = {
  id: '01a22700-0000-7000-8000-000000000000',
  type: 'thing.happened',
  aggregateType: 'thing',
  aggregateId: 't-1',
  organizationId: null,
  requestId: null,
  payload: {},
  metadata: {},
  occurredAt: new Date(0),
};

describe('EventDispatcher.deliver', () => {
  it('runs a handler whose name is also an Object.prototype property', async () => {
    const dispatcher = new EventDispatcher({ handlerTimeoutMs: 1000 });
    const ran: string[] = [];
    for (const name of ['constructor', 'to-string']) {
      dispatcher.register({
        name,
        events: '*',
        handle: () => void ran.push(name),
        location: `T.${name}`,
      });
    }
    const outcomes = await dispatcher.deliver(event, {}, { attempt: 1 });
    expect(outcomes.map((o) => [o.handlerName, o.ok]).sort()).toEqual([
      ['constructor', true],
      ['to-string', true],
    ]);
    expect(ran.sort()).toEqual(['constructor', 'to-string']);
  });

  it('skips only the handlers already in deliveries', async () => {
    const dispatcher = new EventDispatcher({ handlerTimeoutMs: 1000 });
    const ran: string[] = [];
    for (const name of ['audit-log', 'webhook-fanout']) {
      dispatcher.register({
        name,
        events: ['thing.happened'],
        handle: () => void ran.push(name),
        location: name,
      });
    }
    await dispatcher.deliver(event, { 'audit-log': '2026-01-01T00:00:00Z' }, { attempt: 2 });
    expect(ran).toEqual(['webhook-fanout']);
  });
});
