import type { LimitedSettle, OutboxRecord } from '@app/outbox/store/lease/lease.types';
import { failedSettle } from './support/outbox-stores';
import { useOutboxStores } from './support/outbox-stores';
import { invoicePaid } from './support/events';
import { value } from './support/result-value';
import { eventRow } from './support/test-database';

/**
 * The settle of an attempt whose handlers were held back by their limit, on a real PostgreSQL:
 * the attempt given back, `failures` untouched, due at the limit's time, and written under the
 * very claim that ran it and no later one.
 */

const t = useOutboxStores();
const LEASE = { leaseMs: 30_000 };

async function claimOne(): Promise<OutboxRecord> {
  const [record] = value(await t.repo.claim({ limit: 1, ...LEASE, includeDead: false }));
  expect(record).toBeDefined();
  return record;
}

function limited(record: OutboxRecord, handlers: string[], dueAt: Date): LimitedSettle {
  return {
    id: record.id,
    attempts: record.attempts,
    handlers,
    dueAt,
    retryDelayMs: 0,
    leaseExpiresAt: record.leaseExpiresAt,
  };
}

describe('markLimited', () => {
  it('gives the attempt back, records what ran, leaves failures, and is due at the limit’s time', async () => {
    const [{ id }] = await t.db.dataSource.transaction(async (manager) =>
      value(await t.emitStore.enqueue(manager, [invoicePaid()])),
    );
    const first = await claimOne();
    expect(first.attempts).toBe(1);
    const dueAt = new Date(first.claimedAt.getTime() + 5_000);
    expect(value(await t.repo.markLimited([limited(first, ['mail'], dueAt)]))).toEqual({
      settled: [id],
      stale: [],
      retryFrom: dueAt.getTime(),
    });
    const row = await eventRow(t.sql, id);
    expect(row).toMatchObject({
      attempts: 0,
      lease_expires_at: null,
      failures: {},
      last_error: null,
      dispatched_at: null,
    });
    expect(Object.keys(row.deliveries)).toEqual(['mail']);
    expect(new Date(row.next_attempt_at).getTime()).toBe(dueAt.getTime());
  });

  it('writes nothing under a later claim, even one at the same attempt count', async () => {
    const [{ id }] = await t.db.dataSource.transaction(async (manager) =>
      value(await t.emitStore.enqueue(manager, [invoicePaid()])),
    );
    const first = await claimOne();
    const settle = limited(first, [], new Date(first.claimedAt.getTime() + 60_000));
    expect(value(await t.repo.markLimited([settle])).settled).toEqual([id]);
    // The same settle again, as a retry whose first try committed unseen: the count moved back.
    expect(value(await t.repo.markLimited([settle])).stale).toEqual([id]);
    // Claimed again: the count is the first claim's again, the lease is not.
    await t.sql.query(`UPDATE outbox_event SET next_attempt_at = now() WHERE id = $1`, [id]);
    const second = await claimOne();
    expect(second.attempts).toBe(first.attempts);
    expect(value(await t.repo.markLimited([settle])).stale).toEqual([id]);
    expect(await eventRow(t.sql, id)).toMatchObject({ attempts: 1 });
    expect((await eventRow(t.sql, id)).lease_expires_at).not.toBeNull();
  });

  it('makes a failed attempt with a handler held by its limit due when the limit has room, before the retry', async () => {
    const [{ id }] = await t.db.dataSource.transaction(async (manager) =>
      value(await t.emitStore.enqueue(manager, [invoicePaid()])),
    );
    const claimed = await claimOne();
    const roomAt = new Date(claimed.claimedAt.getTime() + 600);
    const settle = failedSettle({
      id,
      attempts: claimed.attempts,
      failedHandlers: ['mail'],
      error: new Error('refused'),
      dead: false,
      retryDelayMs: 600,
      failures: [{ handler: 'mail', count: 1, delayMs: 10_000 }],
      pending: ['mail'],
      limitRoomAt: roomAt,
    });
    expect(value(await t.repo.markFailed([settle], { deadRetryMs: 60_000 })).settled).toEqual([id]);
    const row = await eventRow(t.sql, id);
    expect(new Date(row.next_attempt_at).getTime()).toBe(roomAt.getTime());
  });
});
