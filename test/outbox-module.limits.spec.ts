import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  OutboxAdmin,
  OutboxHealthIndicator,
  OutboxPublisher,
  type NewOutboxEvent,
  type OutboxEvent,
} from '@app/outbox';
import { drainUntilIdle } from '@app/outbox/testing';
import { createOutboxApp, eventually, useTestLeftovers } from './support/outbox-app';
import { useTestDatabase } from './support/test-database';

/**
 * A rate limit in a running engine, one process: what an event held back by its limit looks like
 * (its attempt given back, no failure, due when the limit has room, each held run later than the
 * one before), what the health details and `OutboxAdmin.limits` say, and that an ordered key's
 * next event stays behind the one held.
 */

const RAN = Symbol('ran');
const MINUTE = 60_000;

@Injectable()
class OncePerMinute {
  constructor(@Inject(RAN) private readonly ran: string[]) {}

  @OnOutboxEvent('partner-call', { events: ['partner.call'], rate: { limit: 1, perMs: MINUTE } })
  call(event: OutboxEvent<{ n: number }>) {
    this.ran.push(`call-${event.payload.n}`);
  }

  @OnOutboxEvent('ledger', {
    events: ['ledger.entry'],
    ordered: true,
    rate: { limit: 1, perMs: MINUTE },
  })
  entry(event: OutboxEvent<{ n: number }>) {
    this.ran.push(`entry-${event.payload.n}`);
  }
}

const t = useTestDatabase();
const { closeAfterTest } = useTestLeftovers();

beforeEach(async () => {
  await t.sql.query('TRUNCATE outbox_event, outbox_handler_limit');
});

async function start(ran: string[], autoStart = true) {
  const app = closeAfterTest(
    await createOutboxApp({
      url: t.db.url,
      outbox: { autoStart },
      providers: [OncePerMinute, { provide: RAN, useValue: ran }],
    }),
  );
  const emit = (events: NewOutboxEvent[]) =>
    app
      .get(DataSource)
      .transaction((manager) => app.get(OutboxPublisher).emit(events, { manager }));
  return { app, emit };
}

const call = (n: number, type = 'partner.call', orderingKey?: string): NewOutboxEvent => ({
  type,
  aggregateType: 'call',
  aggregateId: String(n),
  orderingKey,
  payload: { n },
});

describe('a handler held by its rate limit', () => {
  it('gives the attempt back, records no failure, and spaces the held events a window apart', async () => {
    const ran: string[] = [];
    const { app, emit } = await start(ran);
    await emit([call(1), call(2), call(3)]);
    await eventually('one ran, two held', async () => {
      const { rows } = await t.sql.query(
        `SELECT count(*)::int AS n FROM outbox_event
         WHERE dispatched_at IS NULL AND lease_expires_at IS NULL AND next_attempt_at > now()`,
      );
      return ran.length === 1 && rows[0].n === 2;
    });
    const { rows: held } = await t.sql.query(`
      SELECT attempts, failures, last_error,
             extract(epoch FROM next_attempt_at - now()) * 1000 AS due_in_ms
      FROM outbox_event WHERE dispatched_at IS NULL ORDER BY next_attempt_at`);
    for (const row of held) {
      expect(row).toMatchObject({ attempts: 0, failures: {}, last_error: null });
    }
    // The first is due when the window has room; the second a window after it.
    expect(Number(held[0].due_in_ms)).toBeGreaterThan(MINUTE - 10_000);
    expect(Number(held[1].due_in_ms) - Number(held[0].due_in_ms)).toBeGreaterThanOrEqual(
      MINUTE - 1,
    );

    const health = await app.get(OutboxHealthIndicator).isHealthy();
    expect(health.outbox.status).toBe('up');
    expect(health.outbox.heldByLimit).toEqual({ 'partner-call': 2 });
    expect(await app.get(OutboxAdmin).limits()).toEqual([
      {
        handler: 'partner-call',
        partition: '',
        maxConcurrent: null,
        rate: { limit: 1, perMs: MINUTE },
        inFlight: 0,
        inWindow: 1,
        held: 2,
        heldUntil: expect.any(Date),
      },
    ]);
  });

  it('keeps an ordered key’s next event behind the one held', async () => {
    const ran: string[] = [];
    const { emit } = await start(ran);
    await emit([call(1, 'ledger.entry', 'acct-1')]);
    await eventually('the first entry ran', () => ran.length === 1);
    await emit([call(2, 'ledger.entry', 'acct-1'), call(3, 'ledger.entry', 'acct-1')]);
    await eventually('the second entry is held by the limit', async () => {
      const { rows } = await t.sql.query(`SELECT held::int FROM outbox_handler_limit`);
      return rows[0]?.held >= 1;
    });
    // Made due at once: its limit has no room; the third never runs before it.
    await t.sql.query(`UPDATE outbox_event SET next_attempt_at = now()
                       WHERE payload->>'n' = '2' AND lease_expires_at IS NULL`);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(ran).toEqual(['entry-1']);
    const { rows } = await t.sql.query(`
      SELECT payload->>'n' AS n, attempts, deliveries, failures FROM outbox_event
      WHERE dispatched_at IS NULL ORDER BY payload->>'n'`);
    expect(rows).toEqual([
      { n: '2', attempts: 0, deliveries: {}, failures: {} },
      { n: '3', attempts: expect.any(Number), deliveries: {}, failures: {} },
    ]);
  });

  it('is counted as held by drainUntilIdle, which does not wait for it', async () => {
    const ran: string[] = [];
    const { app, emit } = await start(ran, false);
    await emit([call(1), call(2)]);
    expect(await drainUntilIdle(app)).toMatchObject({ claimed: 2, delivered: 1, held: 1 });
    expect(ran).toEqual(['call-1']);
  });
});
