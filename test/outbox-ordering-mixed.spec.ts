import { Injectable, type INestApplication } from '@nestjs/common';
import { OnOutboxEvent, OutboxRetentionSweeper, type OutboxEvent } from '@app/outbox';
import { drainUntilIdle } from '@app/outbox/testing';
import { createOutboxApp, emitEachCommitted } from './support/outbox-app';
import { accountCredited } from './support/events';
import { useTestDatabase } from './support/test-database';

/**
 * Instances that disagree on a handler being ordered, as during the deploy that adds `ordered`:
 * an instance that orders nothing still tells the key when it settles an event placed in it, so
 * the events parked behind it run.
 */

const seen: number[] = [];

@Injectable()
class OrderedLedger {
  @OnOutboxEvent('ledger', { events: ['account.credited'], ordered: true })
  post(event: OutboxEvent<{ n: number }>) {
    seen.push(event.payload.n);
  }
}

@Injectable()
class PlainLedger {
  @OnOutboxEvent('ledger', { events: ['account.credited'] })
  post(event: OutboxEvent<{ n: number }>) {
    seen.push(event.payload.n);
  }
}

const t = useTestDatabase();
let ordering: INestApplication;
let plain: INestApplication;

beforeAll(async () => {
  const outbox = { autoStart: false, retention: { enabled: false } };
  ordering = await createOutboxApp({ url: t.db.url, outbox, providers: [OrderedLedger] });
  // One slot: each claim takes one event, so no claim chains the key's events.
  plain = await createOutboxApp({
    url: t.db.url,
    outbox: { ...outbox, concurrency: 1 },
    providers: [PlainLedger],
  });
});

afterAll(async () => {
  await ordering?.close();
  await plain?.close();
});

/** Credits `account` with each of `numbers`, one committed transaction per event. */
const credit = (account: string, ...numbers: number[]) =>
  emitEachCommitted(
    ordering,
    numbers.map((n) => accountCredited(account, n)),
  );

it('an instance without ordered handlers wakes the events parked behind one it settles', async () => {
  // One transaction per event: the second and third are parked behind the first.
  await credit('42', 1, 2, 3);
  const drained = await drainUntilIdle(plain);
  expect(seen).toEqual([1, 2, 3]);
  expect(drained.claims).toBeGreaterThanOrEqual(3);
  const { rows } = await t.sql.query(`SELECT waiting::int FROM outbox_ordering_wait`);
  expect(rows).toEqual([{ waiting: 0 }]);
});

it('the sweep wakes an event parked behind one settled without telling its key', async () => {
  seen.length = 0;
  await credit('43', 7, 8);
  // The head delivered by an instance of a version without per-key ordering: no done.
  await t.sql.query(
    `UPDATE outbox_event SET dispatched_at = now() WHERE aggregate_id = '43' AND payload->>'n' = '7'`,
  );
  await drainUntilIdle(plain);
  expect(seen).toEqual([]);
  await plain.get(OutboxRetentionSweeper).sweep();
  await drainUntilIdle(plain);
  expect(seen).toEqual([8]);
  // The sweep also set the key's wait count right: the next event is not parked behind nothing.
  const { rows } = await t.sql.query(
    `SELECT waiting::int FROM outbox_ordering_wait WHERE key = 'account:43'`,
  );
  expect(rows).toEqual([{ waiting: 0 }]);
  await credit('43', 9);
  await drainUntilIdle(ordering);
  expect(seen).toEqual([8, 9]);
});
