import { Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  OutboxPublisher,
  OutboxRetentionSweeper,
  type OutboxEvent,
} from '@app/outbox';
import { drainUntilIdle } from '@app/outbox/testing';
import { emitEachCommitted, useOutboxApp } from './support/outbox-app';
import { accountCredited } from './support/events';

/**
 * The retention sweep forgets the ordering bookkeeping of keys with nothing left to do, so the
 * key and wait tables hold the keys in use, not every key ever used; a key with events still to
 * do, or one an emit holds, keeps its places.
 */

const seen: string[] = [];

@Injectable()
class Ledger {
  @OnOutboxEvent('ledger', { events: ['account.credited'], ordered: true })
  post(event: OutboxEvent<{ n: number }>) {
    seen.push(`${event.aggregateId}:${event.payload.n}`);
  }
}

const t = useOutboxApp(
  { outbox: { autoStart: false, retention: { enabled: false } }, providers: [Ledger] },
  { truncateEach: ['outbox_event', 'outbox_ordering_key', 'outbox_ordering_wait'] },
);

/** One transaction per event, as separate requests would. */
const emit = (account: string, ...numbers: number[]) =>
  emitEachCommitted(
    t.app,
    numbers.map((n) => accountCredited(account, n)),
  );

async function bookkeeping() {
  const keys = await t.sql.query<{ key: string; last_position: string }>(
    `SELECT key, last_position::text FROM outbox_ordering_key ORDER BY key`,
  );
  const waits = await t.sql.query<{ key: string; waiting: string }>(
    `SELECT key, waiting::text FROM outbox_ordering_wait ORDER BY key`,
  );
  return {
    keys: keys.rows.map((r) => `${r.key}@${r.last_position}`),
    waits: waits.rows.map((r) => `${r.key}=${r.waiting}`),
  };
}

beforeEach(() => {
  seen.length = 0;
});

it('forgets keys with nothing left to do, and keeps those with events to do', async () => {
  await emit('1', 1, 2, 3);
  await drainUntilIdle(t.app);
  await emit('2', 1, 2);
  expect(await bookkeeping()).toEqual({
    keys: ['account:1@3', 'account:2@2'],
    waits: ['account:1=0', 'account:2=2'],
  });

  await t.app.get(OutboxRetentionSweeper).sweep();
  expect(await bookkeeping()).toEqual({ keys: ['account:2@2'], waits: ['account:2=2'] });

  // A forgotten key starts its places again; a kept one goes on from its last.
  await emit('1', 4, 5);
  await emit('2', 3);
  await drainUntilIdle(t.app);
  expect(seen.filter((s) => s.startsWith('1:'))).toEqual(['1:1', '1:2', '1:3', '1:4', '1:5']);
  expect(seen.filter((s) => s.startsWith('2:'))).toEqual(['2:1', '2:2', '2:3']);
  expect((await bookkeeping()).keys).toEqual(['account:1@2', 'account:2@3']);
});

it('keeps a key an emit holds until that emit has committed', async () => {
  await emit('3', 1);
  await drainUntilIdle(t.app);
  const runner = t.app.get(DataSource).createQueryRunner();
  await runner.startTransaction();
  try {
    await t.app.get(OutboxPublisher).emit(accountCredited('3', 2), { manager: runner.manager });
    // The emit commits while the sweep runs: a sweep that waited for the key and then judged
    // it with a snapshot from before the commit would forget a key whose event is still to do.
    const sweeping = t.app.get(OutboxRetentionSweeper).sweep();
    await new Promise((resolve) => setTimeout(resolve, 300));
    await runner.commitTransaction();
    await sweeping;
  } finally {
    await runner.release();
  }
  expect((await bookkeeping()).keys).toEqual(['account:3@2']);
  await emit('3', 3);
  await drainUntilIdle(t.app);
  expect(seen).toEqual(['3:1', '3:2', '3:3']);
});
