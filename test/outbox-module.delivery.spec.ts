import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  OUTBOX_EVENT_DEAD,
  OutboxEngine,
  OutboxPublisher,
  OutboxLeaseStore,
  OutboxTransactionRequiredError,
  type HandlerContext,
  type OutboxEvent,
  type OutboxEventDeadPayload,
} from '@app/outbox';
import { invoicePaid } from './support/events';
import { eventually, useOutboxApp } from './support/outbox-app';
import { eventRow } from './support/test-database';

/** Delivery through the real module: emit, handlers, retries, dead events. */

interface Call {
  handler: string;
  event: OutboxEvent;
  ctx: HandlerContext;
}

const calls: Call[] = [];
const behaviour: Record<string, (event: OutboxEvent, ctx: HandlerContext) => unknown> = {};

function callsOf(handler: string, eventId?: string): Call[] {
  return calls.filter((c) => c.handler === handler && (!eventId || c.event.id === eventId));
}

function record(handler: string, event: OutboxEvent, ctx: HandlerContext): unknown {
  calls.push({ handler, event, ctx });
  return behaviour[handler]?.(event, ctx);
}

@Injectable()
class AuditLog {
  @OnOutboxEvent('audit-log', { events: '*' })
  handle(event: OutboxEvent, ctx: HandlerContext) {
    return record('audit-log', event, ctx);
  }
}

@Injectable()
class Billing {
  @OnOutboxEvent('webhook-fanout', { events: ['invoice.paid', 'member.invited'] })
  async webhooks(event: OutboxEvent, ctx: HandlerContext) {
    return await record('webhook-fanout', event, ctx);
  }

  @OnOutboxEvent('notification-fanout', { events: ['invoice.paid'] })
  async notify(event: OutboxEvent, ctx: HandlerContext) {
    return await record('notification-fanout', event, ctx);
  }
}

@Injectable()
class DeadWatcher {
  @OnOutboxEvent('dead-watch', { events: [OUTBOX_EVENT_DEAD] })
  handle(event: OutboxEvent, ctx: HandlerContext) {
    return record('dead-watch', event, ctx);
  }
}

const t = useOutboxApp(
  {
    outbox: {
      autoStart: false,
      maxAttempts: 3,
      handlerTimeoutMs: 300,
      leaseMs: 5000,
      retry: { baseMs: 1, maxMs: 1, jitter: 0 },
      deadRetryMs: 1000,
      retention: { enabled: false },
    },
    providers: [AuditLog, Billing, DeadWatcher],
  },
  { truncateEach: ['outbox_event'] },
);
let publisher: OutboxPublisher;
let engine: OutboxEngine;
let dataSource: DataSource;

beforeAll(() => {
  publisher = t.app.get(OutboxPublisher);
  engine = t.app.get(OutboxEngine);
  dataSource = t.app.get(DataSource);
});

beforeEach(() => {
  calls.length = 0;
  for (const key of Object.keys(behaviour)) delete behaviour[key];
});

const paid = invoicePaid;

/** Drains by hand until a drain claims nothing; retries are due at once with a 1 ms backoff. */
async function drainUntilIdle(): Promise<void> {
  for (let i = 0; i < 50; i++) {
    const report = await engine.drainOnce();
    if (!report.ok) throw report.error ?? new Error('drain failed');
    if (report.claimed === 0) {
      const { rows } = await t.sql.query(
        `SELECT count(*)::int AS n FROM outbox_event
         WHERE dispatched_at IS NULL AND dead_at IS NULL AND next_attempt_at > now()`,
      );
      if (rows[0].n === 0) return;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
  throw new Error('outbox did not become idle');
}

const row = (id: string) => eventRow(t.sql, id);

describe('OutboxModule delivery', () => {
  it("emit with returning: 'result' tells a repeated event from a new one; a duplicate runs no handler again", async () => {
    const first = await dataSource.transaction((manager) =>
      publisher.emit(paid(), { manager, returning: 'result' }),
    );
    expect(first).toEqual({ id: expect.any(String), duplicate: false });
    await drainUntilIdle();
    const again = await dataSource.transaction((manager) =>
      publisher.emit([paid({ id: first.id }), paid()], { manager, returning: 'result' }),
    );
    expect(again).toEqual([
      { id: first.id, duplicate: true },
      { id: expect.any(String), duplicate: false },
    ]);
    await drainUntilIdle();
    expect(callsOf('audit-log', first.id)).toHaveLength(1);
    expect(callsOf('audit-log', again[1].id)).toHaveLength(1);
  });

  it('emit in a committed transaction runs every subscribed handler exactly once after commit, with the id emit returned', async () => {
    let id = '';
    await dataSource.transaction(async (manager) => {
      id = await publisher.emit(paid(), { manager });
      // Not yet committed: a drain on another connection sees nothing.
      expect((await engine.drainOnce()).claimed).toBe(0);
    });
    expect(calls).toEqual([]);
    await drainUntilIdle();
    await drainUntilIdle();

    expect(calls.map((c) => c.handler).sort()).toEqual([
      'audit-log',
      'notification-fanout',
      'webhook-fanout',
    ]);
    for (const call of calls) {
      // The event as emitted, with its id and what the outbox fills in.
      expect(call.event).toEqual({
        ...paid(),
        id,
        metadata: {},
        occurredAt: expect.any(Date),
        causationId: null,
        correlationId: null,
        orderingKey: 'invoice:inv-1',
      });
      expect(call.ctx).toMatchObject({
        handlerName: call.handler,
        attempt: 1,
        idempotencyKey: `${call.handler}:${id}`,
      });
      expect(call.ctx.signal.aborted).toBe(false);
    }
    const stored = await row(id);
    expect(stored.dispatched_at).toBeInstanceOf(Date);
    expect(Object.keys(stored.deliveries).sort()).toEqual([
      'audit-log',
      'notification-fanout',
      'webhook-fanout',
    ]);
  });

  it('a handler sees the ordering key the event was emitted with', async () => {
    await dataSource.transaction((manager) =>
      publisher.emit(paid({ orderingKey: 'account:42' }), { manager }),
    );
    await drainUntilIdle();
    expect(calls.map((call) => call.event.orderingKey)).toEqual([
      'account:42',
      'account:42',
      'account:42',
    ]);
  });

  it('emit of a batch returns one id per event, in order', async () => {
    const ids = await dataSource.transaction((manager) =>
      publisher.emit([paid({ aggregateId: 'a' }), paid({ aggregateId: 'b' })], { manager }),
    );
    expect(ids).toHaveLength(2);
    await drainUntilIdle();
    expect(callsOf('audit-log').map((c) => [c.event.id, c.event.aggregateId])).toEqual([
      [ids[0], 'a'],
      [ids[1], 'b'],
    ]);
  });

  it('a rolled-back emit runs nothing', async () => {
    await expect(
      dataSource.transaction(async (manager) => {
        await publisher.emit(paid(), { manager });
        throw new Error('business rule violated');
      }),
    ).rejects.toThrow('business rule violated');
    await drainUntilIdle();
    expect(calls).toEqual([]);
    expect((await t.sql.query('SELECT count(*)::int AS n FROM outbox_event')).rows[0].n).toBe(0);
  });

  it('emit outside a transaction throws OutboxTransactionRequiredError and writes nothing', async () => {
    await expect(publisher.emit(paid())).rejects.toThrow(OutboxTransactionRequiredError);
    const refusal = publisher.emit(paid(), { manager: dataSource.manager });
    await expect(refusal).rejects.toThrow('OutboxPublisher.emit must run inside a transaction');
    // The message names both ways in: an explicit manager and the ambient transaction.
    await expect(refusal).rejects.toThrow(/dataSource\.transaction\(manager =>/);
    await expect(refusal).rejects.toThrow(/@Transactional\(\) or txHost\.withTransaction/);
    expect((await t.sql.query('SELECT count(*)::int AS n FROM outbox_event')).rows[0].n).toBe(0);
  });

  it('one failing handler of three is the only one rerun', async () => {
    let failures = 1;
    behaviour['webhook-fanout'] = () => {
      if (failures-- > 0) throw new Error('receiver returned 503');
    };
    const id = await dataSource.transaction((manager) => publisher.emit(paid(), { manager }));
    await drainUntilIdle();

    expect(callsOf('audit-log', id)).toHaveLength(1);
    expect(callsOf('notification-fanout', id)).toHaveLength(1);
    expect(callsOf('webhook-fanout', id).map((c) => c.ctx.attempt)).toEqual([1, 2]);
    const stored = await row(id);
    expect(stored.attempts).toBe(2);
    expect(stored.dispatched_at).toBeInstanceOf(Date);
    expect(stored.last_error).toBeNull();
  });

  it('a handler over budget fails, sees its signal abort, and the others are delivered', async () => {
    let seen: AbortSignal | undefined;
    let abortReason: unknown;
    behaviour['notification-fanout'] = (_event, ctx) => {
      seen = ctx.signal;
      return new Promise<void>((resolve) =>
        ctx.signal.addEventListener('abort', () => {
          abortReason = ctx.signal.reason;
          resolve();
        }),
      );
    };
    const id = await dataSource.transaction((manager) => publisher.emit(paid(), { manager }));
    const report = await engine.drainOnce();
    expect(report).toMatchObject({ claimed: 1, delivered: 0, failed: 1 });
    expect(seen?.aborted).toBe(true);
    expect(String(abortReason)).toContain('did not finish within its 300 ms budget');
    const stored = await row(id);
    expect(Object.keys(stored.deliveries).sort()).toEqual(['audit-log', 'webhook-fanout']);
    expect(stored.last_error).toBe(
      'notification-fanout: OutboxHandlerTimeoutError: Outbox handler "notification-fanout" did not finish within its 300 ms budget',
    );
  });

  it('a synchronous throw and a rejected promise both stay contained', async () => {
    behaviour['audit-log'] = () => {
      throw new TypeError('sync boom');
    };
    behaviour['webhook-fanout'] = () => Promise.reject(new Error('async boom'));
    const id = await dataSource.transaction((manager) => publisher.emit(paid(), { manager }));
    const report = await engine.drainOnce();
    expect(report).toMatchObject({ claimed: 1, failed: 1 });
    const stored = await row(id);
    expect(Object.keys(stored.deliveries)).toEqual(['notification-fanout']);
    expect(stored.last_error).toContain('audit-log: TypeError: sync boom');
    expect(stored.last_error).toContain('webhook-fanout: Error: async boom');
  });

  it('max attempts lead to dead, one outbox.event.dead delivered to its subscribers, and a replay after the dead retry delivers it', async () => {
    let healthy = false;
    behaviour['webhook-fanout'] = (event) => {
      if (event.type === 'member.invited' && !healthy) throw new Error('endpoint gone');
    };
    const id = await dataSource.transaction((manager) =>
      publisher.emit(paid({ type: 'member.invited', aggregateType: 'member' }), { manager }),
    );
    await drainUntilIdle();

    expect(callsOf('webhook-fanout', id).map((c) => c.ctx.attempt)).toEqual([1, 2, 3]);
    expect((await row(id)).dead_at).toBeInstanceOf(Date);
    const announcements = callsOf('dead-watch');
    expect(announcements).toHaveLength(1);
    expect(announcements[0].event).toMatchObject({
      type: OUTBOX_EVENT_DEAD,
      aggregateType: 'outbox_event',
      aggregateId: id,
      organizationId: 'org-1',
      // It follows from the dead event, in the dead event's chain.
      causationId: id,
      correlationId: id,
    });
    expect(announcements[0].event.payload).toEqual<OutboxEventDeadPayload>({
      eventId: id,
      type: 'member.invited',
      aggregateType: 'member',
      aggregateId: 'inv-1',
      attempts: 3,
      failedHandlers: ['webhook-fanout'],
      lastError: 'webhook-fanout: Error: endpoint gone',
    });
    // The announcement itself reaches the wildcard audit handler too.
    expect(callsOf('audit-log', announcements[0].event.id)).toHaveLength(1);

    healthy = true;
    await eventually('the dead event is replayed and delivered', async () => {
      await engine.drainOnce();
      return (await row(id)).dispatched_at !== null;
    });
    expect(callsOf('webhook-fanout', id).map((c) => c.ctx.attempt)).toEqual([1, 2, 3, 4]);
    expect(callsOf('audit-log', id)).toHaveLength(1);
    expect(callsOf('dead-watch')).toHaveLength(1);
  });

  it('an engine started and stopped twice is stopped for good the second time', async () => {
    const claims = jest.spyOn(OutboxLeaseStore.prototype, 'claim');
    try {
      await engine.start();
      await engine.stop();
      await engine.start();
      expect(engine.state).toBe('running');
      await engine.stop();
      expect(engine.state).toBe('stopped');
      const claimsAtStop = claims.mock.calls.length;
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(claims.mock.calls.length).toBe(claimsAtStop);
      expect(engine.listenerState).toBe('stopped');
    } finally {
      claims.mockRestore();
    }
  });

  it('an event type nobody handles is settled as delivered', async () => {
    const id = await dataSource.transaction((manager) =>
      publisher.emit(paid({ type: 'nobody.cares' }), { manager }),
    );
    await drainUntilIdle();
    expect(callsOf('audit-log', id)).toHaveLength(1);
    expect((await row(id)).dispatched_at).toBeInstanceOf(Date);
  });
});
