import { Injectable } from '@nestjs/common';
import {
  OnOutboxEvent,
  OUTBOX_EVENT_DEAD,
  OutboxEngine,
  OutboxLeaseStore,
  type HandlerContext,
  type OutboxEvent,
  type OutboxEventDeadPayload,
} from '@app/outbox';
import { invoicePaid } from './support/events';
import { failedSettle } from './support/outbox-stores';
import { emitCommitted, useOutboxApp } from './support/outbox-app';

/**
 * Handlers of one event with different retry policies, on a real PostgreSQL. Time is travelled
 * with SQL (a handler's retry time and the event's due time moved to now), never waited for, so
 * the schedules can be minutes long and the test still instant.
 */

const calls: Array<{ handler: string; attempt: number; handlerAttempt: number }> = [];
const failing = new Set<string>();

function run(handler: string, ctx: HandlerContext): void {
  calls.push({ handler, attempt: ctx.attempt, handlerAttempt: ctx.handlerAttempt });
  if (failing.has(handler)) throw new Error(`${handler} failed`);
}

@Injectable()
class Handlers {
  /** A fixed schedule of one delay: two tries. */
  @OnOutboxEvent('crm-sync', { events: ['invoice.paid'], retry: [600_000] })
  crm(_event: OutboxEvent, ctx: HandlerContext) {
    run('crm-sync', ctx);
  }

  /** Quick backoff, many tries. */
  @OnOutboxEvent('ledger', {
    events: ['invoice.paid'],
    retry: { baseMs: 60_000, maxMs: 60_000, jitter: 0 },
    maxAttempts: 5,
  })
  ledger(_event: OutboxEvent, ctx: HandlerContext) {
    run('ledger', ctx);
  }

  /** The module's policy (maxAttempts 3, 1 ms backoff). */
  @OnOutboxEvent('search-index', { events: ['invoice.paid'] })
  search(_event: OutboxEvent, ctx: HandlerContext) {
    run('search-index', ctx);
  }

  @OnOutboxEvent('dead-watch', { events: [OUTBOX_EVENT_DEAD] })
  dead(event: OutboxEvent<OutboxEventDeadPayload>) {
    announced.push(event.payload);
  }
}

const announced: OutboxEventDeadPayload[] = [];

const t = useOutboxApp(
  {
    outbox: {
      autoStart: false,
      maxAttempts: 3,
      retry: { baseMs: 1, maxMs: 1, jitter: 0 },
      deadRetryMs: 3_600_000,
      retention: { enabled: false },
    },
    providers: [Handlers],
  },
  { truncateEach: ['outbox_event'] },
);

beforeEach(() => {
  calls.length = 0;
  announced.length = 0;
  failing.clear();
});

const emit = () => emitCommitted(t.app, invoicePaid());
const drainOnce = () => t.app.get(OutboxEngine).drainOnce();

interface Row {
  failures: Record<string, { count: number; retryAt: string | null }>;
  deliveries: Record<string, string>;
  due_in_s: number;
  dead: boolean;
  delivered: boolean;
  last_error: string | null;
}

async function row(id: string): Promise<Row> {
  const { rows } = await t.sql.query<Row>(
    `SELECT failures, deliveries, last_error, dead_at IS NOT NULL AS dead,
            dispatched_at IS NOT NULL AS delivered,
            round(extract(epoch FROM next_attempt_at - now()))::int AS due_in_s
     FROM outbox_event WHERE id = $1`,
    [id],
  );
  return rows[0];
}

/** Seconds from now until each handler's retry time, or null when it has none. */
function retryInS(r: Row): Record<string, number | null> {
  return Object.fromEntries(
    Object.entries(r.failures).map(([name, f]) => [
      name,
      f.retryAt === null ? null : Math.round((Date.parse(f.retryAt) - Date.now()) / 1000),
    ]),
  );
}

/** Travels to the retry time of `handlers`: they, and so the event, are due now. */
async function travelTo(id: string, handlers: string[]): Promise<void> {
  await t.sql.query(
    `UPDATE outbox_event
     SET failures = failures || coalesce(
           (SELECT jsonb_object_agg(h, failures -> h || jsonb_build_object('retryAt', now()))
            FROM unnest($2::text[]) AS h
            WHERE failures ? h),
           '{}'),
         next_attempt_at = now()
     WHERE id = $1`,
    [id, handlers],
  );
}

const ran = () => calls.map((c) => c.handler).sort();

describe('per-handler retry policies', () => {
  it('count failures per handler and make the event due at the earliest next try', async () => {
    failing.add('crm-sync').add('ledger');
    const id = await emit();
    await drainOnce();

    expect(ran()).toEqual(['crm-sync', 'ledger', 'search-index']);
    const r = await row(id);
    expect(Object.keys(r.deliveries)).toEqual(['search-index']);
    expect(Object.fromEntries(Object.entries(r.failures).map(([k, v]) => [k, v.count]))).toEqual({
      'crm-sync': 1,
      ledger: 1,
    });
    // crm-sync: 600 s (its schedule); ledger: 60 s (its backoff); the event: the earlier.
    expect(retryInS(r)).toEqual({ 'crm-sync': 600, ledger: 60 });
    expect(r.due_in_s).toBe(60);
    expect(r.dead).toBe(false);
  });

  it('rerun only the failed handlers whose own try is due', async () => {
    failing.add('crm-sync').add('ledger');
    const id = await emit();
    await drainOnce();
    calls.length = 0;
    failing.delete('ledger');

    await travelTo(id, ['ledger']);
    await drainOnce();

    // crm-sync's try is still 600 s away: it does not run with ledger's.
    expect(calls).toEqual([{ handler: 'ledger', attempt: 2, handlerAttempt: 2 }]);
    const r = await row(id);
    expect(Object.keys(r.deliveries).sort()).toEqual(['ledger', 'search-index']);
    // Due again at crm-sync's own time; its error is still the last one.
    expect(r.due_in_s).toBe(600);
    expect(r.last_error).toMatch(/crm-sync: Error: crm-sync failed/);
  });

  it('make the event dead for a handler that used its attempts, once no other handler retries, naming it', async () => {
    failing.add('crm-sync').add('ledger');
    const id = await emit();
    await drainOnce();

    // crm-sync's second and last try fails; ledger still has tries left: the event stays live.
    await travelTo(id, ['crm-sync']);
    calls.length = 0;
    await drainOnce();
    expect(calls).toEqual([{ handler: 'crm-sync', attempt: 2, handlerAttempt: 2 }]);
    let r = await row(id);
    expect(r.failures['crm-sync']).toEqual({ count: 2, retryAt: null });
    expect(r.dead).toBe(false);

    // ledger then succeeds: nothing is left that may still run, and crm-sync used its tries.
    failing.delete('ledger');
    await travelTo(id, ['ledger']);
    calls.length = 0;
    await drainOnce();
    expect(ran()).toEqual(['ledger']);
    r = await row(id);
    expect(r.dead).toBe(true);
    expect(Object.keys(r.deliveries).sort()).toEqual(['ledger', 'search-index']);

    await t.sql.query(`UPDATE outbox_event SET next_attempt_at = now() WHERE type = $1`, [
      OUTBOX_EVENT_DEAD,
    ]);
    await drainOnce();
    expect(announced).toEqual([
      expect.objectContaining({ eventId: id, failedHandlers: ['crm-sync'], attempts: 3 }),
    ]);
  });

  it('give every handler left one more try on a dead replay, and deliver when they succeed', async () => {
    failing.add('search-index');
    const id = await emit();
    for (let i = 0; i < 3; i++) {
      await travelTo(id, ['search-index']);
      await drainOnce();
    }
    expect((await row(id)).dead).toBe(true);
    expect(calls.filter((c) => c.handler === 'search-index').map((c) => c.handlerAttempt)).toEqual([
      1, 2, 3,
    ]);

    failing.clear();
    calls.length = 0;
    await t.sql.query(`UPDATE outbox_event SET next_attempt_at = now() WHERE id = $1`, [id]);
    await drainOnce();
    expect(calls).toEqual([{ handler: 'search-index', attempt: 4, handlerAttempt: 4 }]);
    expect((await row(id)).delivered).toBe(true);
  });

  it('never counts a failure, nor a death, for a handler the row already records as delivered', async () => {
    // A transactional handler whose commit landed as its budget ran out: its delivery is in the
    // row, and a settle that still calls it failed must not undo that.
    const id = await emit();
    await t.sql.query(
      `UPDATE outbox_event
       SET attempts = 2, lease_expires_at = now() + interval '1 minute',
           deliveries = '{"crm-sync": "2026-12-01T00:00:00Z"}'
       WHERE id = $1`,
      [id],
    );
    const result = await t.app.get(OutboxLeaseStore).markFailed(
      [
        failedSettle({
          id,
          attempts: 2,
          failedHandlers: ['crm-sync'],
          error: 'crm-sync: timed out',
          dead: true,
          failures: [{ handler: 'crm-sync', count: 2, delayMs: null }],
        }),
      ],
      { deadRetryMs: 3_600_000 },
    );
    expect(result).toEqual({
      ok: true,
      value: { settled: [id], stale: [], newlyDead: [], retryFrom: expect.any(Number) },
    });
    const r = await row(id);
    expect(r.dead).toBe(false);
    expect(r.failures).toEqual({});
  });
});
