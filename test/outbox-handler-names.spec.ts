import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, OutboxAdmin, type HandlerContext, type OutboxEvent } from '@app/outbox';
import { drainUntilIdle, outboxTestingOptions } from '@app/outbox/testing';
import { emitCommitted, useOutboxApp } from './support/outbox-app';

/**
 * Handler names that are also names every plain JavaScript object inherits (`constructor`) or
 * that look like them: each is looked up as an own key of `deliveries` and `failures`, never
 * through the prototype.
 */

type Payload = { failing: string[] };

const runs: Array<{ handler: string; attempt: number }> = [];

function run(handler: string, event: OutboxEvent<Payload>, context: HandlerContext) {
  runs.push({ handler, attempt: context.handlerAttempt });
  if (event.payload.failing.includes(handler)) throw new Error(`${handler} is down`);
}

@Injectable()
class Handlers {
  @OnOutboxEvent('constructor', { events: ['name.checked'] })
  construct(event: OutboxEvent<Payload>, context: HandlerContext) {
    run('constructor', event, context);
  }

  @OnOutboxEvent('to-string', { events: ['name.checked'] })
  toText(event: OutboxEvent<Payload>, context: HandlerContext) {
    run('to-string', event, context);
  }

  @OnOutboxEvent('has-own-property', { events: ['name.checked'] })
  hasOwn(event: OutboxEvent<Payload>, context: HandlerContext) {
    run('has-own-property', event, context);
  }
}

const t = useOutboxApp(
  { outbox: outboxTestingOptions({ maxAttempts: 2 }), providers: [Handlers] },
  { truncateEach: ['outbox_event'] },
);

beforeEach(() => {
  runs.length = 0;
});

function emit(failing: string[]): Promise<string> {
  const payload = { failing };
  return emitCommitted(t.app, {
    type: 'name.checked',
    aggregateType: 'name',
    aggregateId: '1',
    payload,
  });
}

const ran = () => runs.map((r) => `${r.handler}#${r.attempt}`).sort();

it('a failed `constructor` handler is retried alone, on its own second attempt', async () => {
  const id = await emit(['constructor']);
  // The retry is a second away (the module's default schedule): this drain runs the first try.
  await drainUntilIdle(t.app);
  expect(ran()).toEqual(['constructor#1', 'has-own-property#1', 'to-string#1']);

  runs.length = 0;
  await drainUntilIdle(t.app, { makeRetryingDue: true });
  expect(ran()).toEqual(['constructor#2']);
  const shown = await t.app.get(OutboxAdmin).show(id);
  expect(shown?.state).toBe('dead');
});

it('a dead event lists `constructor` as failed, and a replay of `constructor` reruns it alone', async () => {
  const id = await emit(['constructor', 'to-string']);
  await drainUntilIdle(t.app, { makeRetryingDue: true });
  const admin = t.app.get(OutboxAdmin);
  const [dead] = (await admin.list()).items;
  expect(dead.id).toBe(id);
  expect(dead.failedHandlers.map((h) => h.name).sort()).toEqual(['constructor', 'to-string']);
  expect(dead.deliveredHandlers).toEqual(['has-own-property']);

  runs.length = 0;
  await admin.replay({ ids: [id] }, { handlers: ['constructor'] });
  await drainUntilIdle(t.app);
  expect(ran()).toEqual(['constructor#3']);
});
