import { randomUUID } from 'node:crypto';
import type { Notification } from 'pg';
import { DataSource } from 'typeorm';
import {
  OUTBOX_ENTITIES,
  OUTBOX_EVENT_DEAD,
  OutboxEventConflictError,
  OutboxLeaseStore,
  type NewOutboxEvent,
  type OutboxEventDeadPayload,
  type OutboxRecord,
  type MarkFailedOptions,
  type SettleOutcome,
} from '@app/outbox';
import { CLAIM } from '@app/outbox/store/lease/claim.sql';
import { RetentionStore } from '@app/outbox/store/retention.store';
import { eventRow } from './support/test-database';
import { failedSettle, useOutboxStores } from './support/outbox-stores';
import { invoicePaid } from './support/events';
import { holdHorizon } from './support/horizon';
import { value } from './support/result-value';

/**
 * The lease proof: every guarantee the relay builds on, shown against a real PostgreSQL with
 * real concurrent connections. Time is moved by rewriting timestamps relative to the SQL clock
 * (`now() - interval`), never by reading the Node clock. `next_attempt_at` is when an unsettled
 * row is next claimable (the lease end while claimed, the replay time of a dead row), so a test
 * that moves a lease or a dead time moves it too, as the outbox's own statements would have.
 */

const CHANNEL = 'outbox_lease_proof';
const HOUR = 3_600_000;
const LEASE = { leaseMs: 60_000 };

const t = useOutboxStores(CHANNEL);

/** Settles one failed attempt (see failedSettle) with `options`; what it wrote. */
async function failOnce(
  settle: Parameters<typeof failedSettle>[0],
  options: MarkFailedOptions = { deadRetryMs: HOUR },
): Promise<SettleOutcome> {
  return value(await t.repo.markFailed([failedSettle(settle)], options));
}

const event = invoicePaid;

async function enqueue(...events: NewOutboxEvent[]): Promise<string[]> {
  return (await enqueueDetailed(...events)).map((e) => e.id);
}

async function enqueueDetailed(...events: NewOutboxEvent[]) {
  return t.db.dataSource.transaction(async (manager) =>
    value(await t.emitStore.enqueue(manager, events)),
  );
}

async function claim(
  limit = 100,
  options: Partial<typeof LEASE> & { types?: string[]; includeDead?: boolean } = {},
) {
  return value(await t.repo.claim({ limit, ...LEASE, ...options }));
}

const row = (id: string) => eventRow(t.sql, id);

/**
 * Ends the lease of a row as if its time had run out, on the SQL clock. The claim wrote the lease
 * end as the row's due time too, so both move.
 */
async function expireLease(id: string) {
  await t.sql.query(
    `UPDATE outbox_event
     SET lease_expires_at = now() - interval '1 millisecond',
         next_attempt_at = now() - interval '1 millisecond'
     WHERE id = $1`,
    [id],
  );
}

/** `count` dead rows, dead two hours ago, their replay due for the last hour. */
async function enqueueDueDead(count: number): Promise<string[]> {
  const ids = await enqueue(...Array.from({ length: count }, () => event({ type: 'dead.one' })));
  await t.sql.query(
    `UPDATE outbox_event
     SET dead_at = now() - interval '2 hours', next_attempt_at = now() - interval '1 hour',
         attempts = 3
     WHERE id = ANY ($1)`,
    [ids],
  );
  return ids;
}

async function deadEvents(): Promise<OutboxEventDeadPayload[]> {
  const { rows } = await t.sql.query<{ payload: OutboxEventDeadPayload }>(
    'SELECT payload FROM outbox_event WHERE type = $1',
    [OUTBOX_EVENT_DEAD],
  );
  return rows.map((r) => r.payload);
}

/** Collects notifications on a dedicated connection. */
async function listen(...channels: string[]) {
  const client = await t.db.connect();
  const received: Notification[] = [];
  const waiters: Array<() => void> = [];
  client.on('notification', (n) => {
    received.push(n);
    waiters.splice(0).forEach((wake) => wake());
  });
  for (const channel of channels) await client.query(`LISTEN ${client.escapeIdentifier(channel)}`);
  return {
    received,
    /** Resolves once a notification on `channel` has arrived. */
    async next(channel: string): Promise<void> {
      while (!received.some((n) => n.channel === channel)) {
        await new Promise<void>((wake) => waiters.push(wake));
      }
    },
  };
}

/**
 * PostgreSQL delivers notifications to a listener in commit order, so once a sentinel NOTIFY
 * committed after a point has arrived, every notification committed before that point has too.
 */
async function sendSentinel(channel = 'sentinel') {
  await t.sql.query(`NOTIFY ${channel}`);
}

describe('outbox lease proof', () => {
  it('1. an enqueue in a rolled-back transaction leaves no row and wakes no listener', async () => {
    const listener = await listen(CHANNEL, 'sentinel');
    let id = '';
    await expect(
      t.db.dataSource.transaction(async (manager) => {
        [{ id }] = value(await t.emitStore.enqueue(manager, event()));
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');

    await sendSentinel();
    await listener.next('sentinel');
    expect(listener.received.filter((n) => n.channel === CHANNEL)).toHaveLength(0);
    expect(id).not.toBe('');
    expect(await row(id)).toBeUndefined();
  });

  it('2. an enqueue in a committed transaction wakes a listener on another connection only after COMMIT', async () => {
    const listener = await listen(CHANNEL, 'sentinel');
    const runner = t.db.dataSource.createQueryRunner();
    await runner.connect();
    try {
      await runner.startTransaction();
      const [{ id }] = value(await t.emitStore.enqueue(runner.manager, event()));

      await sendSentinel();
      await listener.next('sentinel');
      expect(listener.received.filter((n) => n.channel === CHANNEL)).toHaveLength(0);
      expect(await row(id)).toBeUndefined(); // not visible to others before commit

      await runner.commitTransaction();
      await listener.next(CHANNEL);
      expect(listener.received.filter((n) => n.channel === CHANNEL)).toHaveLength(1);
      expect(await row(id)).toBeDefined();
    } finally {
      await runner.release();
    }
  });

  it('3. the same event id enqueued again keeps one row and says so; a different event under it is refused', async () => {
    const [id] = await enqueue(event({ payload: { version: 1 } }));
    await expect(enqueueDetailed(event({ id, payload: { version: 1 } }))).resolves.toEqual([
      { id, duplicate: true },
    ]);
    const other = randomUUID();
    await expect(enqueueDetailed(event({ id: other }), event({ id: other }))).resolves.toEqual([
      { id: other, duplicate: false },
      { id: other, duplicate: true },
    ]);

    // An id given in capitals is the same id; a JSON null payload repeated is no conflict.
    const upper = randomUUID().toUpperCase();
    await expect(enqueueDetailed(event({ id: upper, payload: null }))).resolves.toEqual([
      { id: upper.toLowerCase(), duplicate: false },
    ]);
    await expect(enqueueDetailed(event({ id: upper, payload: null }))).resolves.toEqual([
      { id: upper.toLowerCase(), duplicate: true },
    ]);
    await t.sql.query('DELETE FROM outbox_event WHERE id = $1', [upper.toLowerCase()]);

    const conflict = enqueue(event({ id, payload: { version: 2 } }));
    await expect(conflict).rejects.toBeInstanceOf(OutboxEventConflictError);
    await expect(conflict).rejects.toMatchObject({ eventId: id, storedType: 'invoice.paid' });
    // Another ordering key is another event; the aggregate's key given by name is the same one.
    await expect(
      enqueue(event({ id, payload: { version: 1 }, orderingKey: 'invoice:inv-2' })),
    ).rejects.toBeInstanceOf(OutboxEventConflictError);
    await expect(
      enqueueDetailed(event({ id, payload: { version: 1 }, orderingKey: 'invoice:inv-1' })),
    ).resolves.toEqual([{ id, duplicate: true }]);
    // A conflicting copy among new events: the transaction rolls back, so none is written.
    const fresh = randomUUID();
    await expect(
      enqueue(event({ id: fresh }), event({ id, type: 'invoice.voided' })),
    ).rejects.toBeInstanceOf(OutboxEventConflictError);

    const { rows } = await t.sql.query('SELECT id, payload FROM outbox_event ORDER BY id');
    expect(rows).toEqual(
      [
        { id, payload: { version: 1 } },
        { id: other, payload: { amount: 100 } },
      ].sort((a, b) => a.id.localeCompare(b.id)),
    );
  });

  it('4. claim returns rows in due order (next_attempt_at, then id) and respects the limit', async () => {
    // Three transactions so the due times differ; the middle one holds two events that share a
    // transaction time and are ordered by their time-ordered ids.
    const [first] = await enqueue(event());
    const [second, third] = await enqueue(event(), event());
    const [fourth] = await enqueue(event());
    // The last event has been due for an hour (a retry whose time came); the third occurred a
    // day ago but, like the others, became due when it was enqueued: due time orders, not
    // occurrence.
    await t.sql.query(
      `UPDATE outbox_event SET
         next_attempt_at = CASE id WHEN $1::uuid THEN now() - interval '1 hour'
                                   ELSE next_attempt_at END,
         occurred_at = CASE id WHEN $2::uuid THEN now() - interval '1 day' ELSE occurred_at END
       WHERE id IN ($1, $2)`,
      [fourth, third],
    );

    const claimed = await claim(3);
    expect(claimed.map((r) => r.id)).toEqual([fourth, first, second]);
    expect((await claim(3)).map((r) => r.id)).toEqual([third]);
  });

  it('5. two claims started together on two connections never return the same row, and together return every due row', async () => {
    const total = 300;
    const ids = await enqueue(
      ...Array.from({ length: total }, (_, i) => event({ aggregateId: `a${i}` })),
    );
    const other = new DataSource({
      type: 'postgres',
      url: t.db.url,
      entities: [...OUTBOX_ENTITIES],
    });
    await other.initialize();
    const otherRepo = new OutboxLeaseStore(other, { channel: CHANNEL });
    const gate = await t.db.connect();
    try {
      // Hold both claims behind a table lock so they start at the same moment once released.
      await gate.query('BEGIN');
      await gate.query('LOCK TABLE outbox_event IN EXCLUSIVE MODE');
      const claims = Promise.all([
        t.repo.claim({ limit: 200, ...LEASE }),
        otherRepo.claim({ limit: 200, ...LEASE }),
      ]);
      await waitFor(async () => {
        const { rows } = await t.sql.query(
          `SELECT count(*)::int AS waiting FROM pg_stat_activity
           WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        return rows[0].waiting === 2;
      });
      await gate.query('COMMIT');
      const [a, b] = (await claims).map(value);

      const idsA = a.map((r) => r.id);
      const idsB = b.map((r) => r.id);
      expect(idsA.filter((id) => idsB.includes(id))).toEqual([]);
      expect([...idsA, ...idsB].sort()).toEqual([...ids].sort());
      expect(a.length).toBeGreaterThan(0);
      expect(b.length).toBeGreaterThan(0);
    } finally {
      // A failure before COMMIT would otherwise keep the table locked for every later test.
      await gate.end();
      await other.destroy();
    }
  });

  it('6. claim bumps attempts and sets the lease end from the SQL clock', async () => {
    const [id] = await enqueue(event());
    const before = await sqlNow();
    const [claimed] = await claim(10, { leaseMs: 90_000 });
    const after = await sqlNow();

    expect(claimed.attempts).toBe(1);
    const stored = await row(id);
    expect(stored!.attempts).toBe(1);
    // Times travel as epoch ms: the record's must be the row's, to the millisecond.
    expect(claimed.occurredAt).toEqual(stored!.occurred_at);
    expect(claimed.deadAt).toBeNull();
    expect(claimed.deliveries).toEqual({});
    expect(stored!.lease_expires_at).toEqual(claimed.leaseExpiresAt);
    // Due again exactly when the lease ends, should no settle come.
    expect(stored!.next_attempt_at).toEqual(claimed.leaseExpiresAt);
    const leaseStart = claimed.leaseExpiresAt.getTime() - 90_000;
    expect(leaseStart).toBeGreaterThanOrEqual(before.getTime());
    expect(leaseStart).toBeLessThanOrEqual(after.getTime());
  });

  it('7. a leased row is not claimable until its lease ends, then is claimable again with one more attempt', async () => {
    const [id] = await enqueue(event());
    const [first] = await claim(10, { leaseMs: 400 });
    expect(await claim()).toEqual([]);

    // Wait on the real SQL clock for the lease to run out.
    let again: OutboxRecord[] = [];
    await waitFor(async () => (again = await claim()).length > 0);
    expect(again.map((r) => r.id)).toEqual([id]);
    expect(again[0].attempts).toBe(first.attempts + 1);
    expect((await sqlNow()).getTime()).toBeGreaterThanOrEqual(first.leaseExpiresAt.getTime());
  });

  it('8. a settle with a stale attempt count writes nothing; the fresh one writes', async () => {
    const [id] = await enqueue(event());
    const [stale] = await claim();
    await expireLease(id);
    const [fresh] = await claim();
    expect(fresh.attempts).toBe(stale.attempts + 1);

    const staleDelivered = value(
      await t.repo.markDelivered([{ id, attempts: stale.attempts, handlers: ['audit-log'] }]),
    );
    expect(staleDelivered).toEqual({ settled: [], stale: [id] });
    const staleFailed = await failOnce({
      id,
      attempts: stale.attempts,
      failedHandlers: ['x'],
      error: 'late',
      dead: stale.attempts >= 1,
    });
    expect(staleFailed).toEqual({ settled: [], stale: [id], newlyDead: [], retryFrom: null });
    const untouched = await row(id);
    expect(untouched).toMatchObject({
      dispatched_at: null,
      dead_at: null,
      last_error: null,
      deliveries: {},
    });
    expect(untouched!.lease_expires_at).toEqual(fresh.leaseExpiresAt);

    const written = value(
      await t.repo.markDelivered([{ id, attempts: fresh.attempts, handlers: ['audit-log'] }]),
    );
    expect(written).toEqual({ settled: [id], stale: [] });
    const delivered = await row(id);
    expect(delivered!.dispatched_at).toBeInstanceOf(Date);
    expect(delivered!.lease_expires_at).toBeNull();
    expect(Object.keys(delivered!.deliveries)).toEqual(['audit-log']);
  });

  it('8b. a failed settle is applied once: retried after it committed, or after the row was given back, it is stale', async () => {
    const fail = async (id: string, attempts: number, error: string) =>
      await failOnce({
        id,
        attempts,
        failedHandlers: ['h'],
        error,
        dead: attempts >= 10,
        retryDelayMs: 60_000,
      });
    const [id, released] = await enqueue(event(), event());
    const claimed = await claim();
    const attempts = claimed[0].attempts;
    expect(await fail(id, attempts, 'first')).toEqual({
      settled: [id],
      stale: [],
      newlyDead: [],
      retryFrom: expect.any(Number),
    });
    const settled = await row(id);
    // The same settle again, as a retry whose first try committed unseen: nothing moves.
    expect(await fail(id, attempts, 'second')).toEqual({
      settled: [],
      stale: [id],
      newlyDead: [],
      retryFrom: null,
    });
    expect(await row(id)).toEqual(settled);

    // A claim whose lease ran out, taken again by a relay that then gave it back unstarted: the
    // row is back at the first claim's attempt count, but that claim no longer holds it.
    await expireLease(released);
    const [again] = await claim();
    expect(again).toMatchObject({ id: released, attempts: attempts + 1 });
    expect(value(await t.repo.release([{ id: released, attempts: again.attempts }]))).toEqual({
      settled: [released],
      stale: [],
    });
    const givenBack = await row(released);
    expect(givenBack).toMatchObject({ attempts, lease_expires_at: null });
    expect(await fail(released, attempts, 'late')).toEqual({
      settled: [],
      stale: [released],
      newlyDead: [],
      retryFrom: null,
    });
    expect(await row(released)).toEqual(givenBack);
  });

  it('9. partial deliveries from two settles merge; a stale copy never erases a delivered handler', async () => {
    const [id] = await enqueue(event());
    const [attempt1] = await claim();
    await failOnce({
      id,
      attempts: attempt1.attempts,
      handlers: ['audit-log'],
      failedHandlers: ['webhook-fanout'],
      error: new Error('receiver down'),
      dead: attempt1.attempts >= 10,
    });
    const auditTime = (await row(id))!.deliveries['audit-log'];
    expect(auditTime).toEqual(expect.any(String));

    const [attempt2] = await claim();
    expect(Object.keys(attempt2.deliveries)).toEqual(['audit-log']);
    // The relay re-sends a handler it already knows about alongside the new one; the first
    // delivery time is kept.
    value(
      await t.repo.markDelivered([
        { id, attempts: attempt2.attempts, handlers: ['webhook-fanout', 'audit-log'] },
      ]),
    );
    // A copy of the row from attempt 1, settled late with what it saw then.
    const late = await failOnce({
      id,
      attempts: attempt1.attempts,
      failedHandlers: ['audit-log', 'webhook-fanout'],
      error: 'x',
      dead: attempt1.attempts >= 10,
    });
    expect(late.stale).toEqual([id]);

    const merged = (await row(id))!.deliveries;
    expect(Object.keys(merged).sort()).toEqual(['audit-log', 'webhook-fanout']);
    expect(merged['audit-log']).toBe(auditTime);
  });

  it('10. a failed row is not claimable before its next due time', async () => {
    const [id] = await enqueue(event());
    const [claimed] = await claim();
    const before = await sqlNow();
    await failOnce({
      id,
      attempts: claimed.attempts,
      failedHandlers: ['h'],
      error: 'boom',
      dead: claimed.attempts >= 10,
      retryDelayMs: 500,
    });
    const stored = await row(id);
    expect(stored!.lease_expires_at).toBeNull();
    expect(stored!.next_attempt_at.getTime()).toBeGreaterThanOrEqual(before.getTime() + 500);
    expect(await claim()).toEqual([]);

    let again: OutboxRecord[] = [];
    await waitFor(async () => (again = await claim()).length > 0);
    expect(again[0].attempts).toBe(2);
    expect((await sqlNow()).getTime()).toBeGreaterThanOrEqual(stored!.next_attempt_at.getTime());
  });

  it('11. at max attempts the row becomes dead and exactly one outbox.event.dead event exists, also after further failures', async () => {
    const [id] = await enqueue(event({ type: 'member.invited', aggregateId: 'm-7' }));
    const fail = (attempts: number) =>
      failOnce(
        {
          id,
          attempts,
          handlers: ['audit-log'],
          failedHandlers: ['webhook-fanout'],
          error: new Error('503'),
          dead: attempts >= 3,
        },
        // Replays are due as soon as the row is dead, so this test can replay it at once.
        { deadRetryMs: 0 },
      );

    for (const attempt of [1, 2]) {
      const [claimed] = await claim(10, { types: ['member.invited'] });
      expect(claimed.attempts).toBe(attempt);
      expect(await fail(attempt)).toEqual({
        settled: [id],
        stale: [],
        newlyDead: [],
        retryFrom: expect.any(Number),
      });
      expect((await row(id))!.dead_at).toBeNull();
    }
    const [third] = await claim(10, { types: ['member.invited'] });
    expect(await fail(third.attempts)).toEqual({
      settled: [id],
      stale: [],
      newlyDead: [id],
      retryFrom: null,
    });
    const dead = await row(id);
    expect(dead!.dead_at).toBeInstanceOf(Date);

    const announced = await deadEvents();
    expect(announced).toEqual([
      {
        eventId: id,
        type: 'member.invited',
        aggregateType: 'invoice',
        aggregateId: 'm-7',
        attempts: 3,
        failedHandlers: ['webhook-fanout'],
        lastError: 'Error: 503',
      },
    ]);
    const { rows: announcement } = await t.sql.query(
      'SELECT aggregate_type, aggregate_id, organization_id, request_id FROM outbox_event WHERE type = $1',
      [OUTBOX_EVENT_DEAD],
    );
    expect(announcement).toEqual([
      {
        aggregate_type: 'outbox_event',
        aggregate_id: id,
        organization_id: 'org-1',
        request_id: 'req-1',
      },
    ]);

    // Replays that fail again keep it dead, move its dead time, and announce nothing new.
    for (let replay = 0; replay < 2; replay++) {
      const previousDeadAt = (await row(id))!.dead_at as Date;
      const [again] = await claim(10, { types: ['member.invited'] });
      expect(again.deadAt).toEqual(previousDeadAt);
      expect(await fail(again.attempts)).toEqual({
        settled: [id],
        stale: [],
        newlyDead: [],
        retryFrom: null,
      });
      const after = await row(id);
      expect(after!.dead_at.getTime()).toBeGreaterThan(previousDeadAt.getTime());
      expect(after!.next_attempt_at).toEqual(after!.dead_at);
      expect(after!.dispatched_at).toBeNull();
    }
    expect(await deadEvents()).toHaveLength(1);
  });

  it('11b. a dead announcement that itself runs out of attempts announces nothing', async () => {
    const [id] = await enqueue(event({ type: OUTBOX_EVENT_DEAD }));
    const [claimed] = await claim();
    const outcome = await failOnce({
      id,
      attempts: claimed.attempts,
      failedHandlers: ['h'],
      error: 'x',
      dead: claimed.attempts >= 1,
    });
    expect(outcome.newlyDead).toEqual([id]);
    const { rows } = await t.sql.query('SELECT count(*)::int AS n FROM outbox_event');
    expect(rows[0].n).toBe(1);
  });

  it('12. a dead row is claimed again only after the dead retry delay, by the same claim statement', async () => {
    const [deadId] = await enqueue(event({ type: 'dead.one' }));
    const [claimed] = await claim();
    const deadRetryMs = 500;
    await failOnce(
      {
        id: deadId,
        attempts: claimed.attempts,
        failedHandlers: ['h'],
        error: 'x',
        dead: claimed.attempts >= 1,
      },
      { deadRetryMs },
    );
    const dead = (await row(deadId))!;
    const deadAt = dead.dead_at as Date;
    // The replay time is written with the dead time, from the same SQL clock reading.
    expect(dead.next_attempt_at.getTime()).toBe(deadAt.getTime() + deadRetryMs);
    expect(dead.lease_expires_at).toBeNull();
    const [liveId] = await enqueue(event({ type: 'live.one' }));

    // One claim returns the live row (and the announcement) but not the resting dead row.
    const first = await claim(10);
    expect(first.map((r) => r.id)).toContain(liveId);
    expect(first.map((r) => r.id)).not.toContain(deadId);

    let replay: OutboxRecord[] = [];
    await waitFor(async () => (replay = await claim(10)).length > 0);
    expect(replay.map((r) => r.id)).toEqual([deadId]);
    expect(replay[0].deadAt).toEqual(deadAt);
    expect(replay[0].attempts).toBe(2);
    expect((await sqlNow()).getTime()).toBeGreaterThanOrEqual(deadAt.getTime() + deadRetryMs);
    // Under its replay lease it is not due again until the lease ends.
    expect((await row(deadId))!.next_attempt_at).toEqual(replay[0].leaseExpiresAt);
    expect(await claim(10)).toEqual([]);
  });

  it('12b. dead replays get half the batch at most while live rows wait, none of a claim of one, and whatever live rows leave', async () => {
    const deadIds = await enqueueDueDead(4);
    const liveIds = await enqueue(...Array.from({ length: 4 }, () => event()));
    const kinds = (records: OutboxRecord[]) => ({
      dead: records.filter((r) => deadIds.includes(r.id)).length,
      live: records.filter((r) => liveIds.includes(r.id)).length,
    });

    // A claim of one takes live work, never a replay, while live work is due.
    expect(kinds(await claim(1))).toEqual({ dead: 0, live: 1 });
    // Of four: two replays (the reserved half), two live rows.
    expect(kinds(await claim(4))).toEqual({ dead: 2, live: 2 });
    // One live row left: it and the remaining replays, which take what live rows left unused.
    expect(kinds(await claim(4))).toEqual({ dead: 2, live: 1 });
  });

  it('12c. a claim of live rows alone takes every due live row in due order and no due dead row', async () => {
    const deadIds = await enqueueDueDead(3);
    const liveIds = await enqueue(...Array.from({ length: 3 }, () => event()));

    const live = await claim(10, { includeDead: false });
    expect(live.map((r) => r.id)).toEqual(liveIds);
    expect(live.every((r) => r.attempts === 1 && r.deadAt === null)).toBe(true);
    // The replays stay due for a claim that looks for them.
    expect((await claim(10)).map((r) => r.id)).toEqual(deadIds);
  });

  it('13. a dead row delivered on replay counts as delivered and leaves the dead set', async () => {
    const [id] = await enqueue(event({ type: 'replayed' }));
    const [claimed] = await claim(10, { types: ['replayed'] });
    await failOnce(
      {
        id,
        attempts: claimed.attempts,
        handlers: ['a'],
        failedHandlers: ['b'],
        error: 'x',
        dead: claimed.attempts >= 1,
      },
      { deadRetryMs: 0 },
    );
    expect(value(await t.repo.pendingState({ types: ['replayed'] })).dead).toBe(1);

    const [replay] = await claim(10, { types: ['replayed'] });
    expect(replay.deliveries).toEqual({ a: expect.any(String) });
    expect(
      value(await t.repo.markDelivered([{ id, attempts: replay.attempts, handlers: ['b'] }])),
    ).toEqual({
      settled: [id],
      stale: [],
    });

    const state = value(await t.repo.pendingState({ types: ['replayed'] }));
    expect(state).toMatchObject({ dead: 0, due: 0, retrying: 0, inFlight: 0, nextDueInMs: null });
    expect(await claim(10, { types: ['replayed'] })).toEqual([]);
    const delivered = await row(id);
    expect(delivered!.dispatched_at).toBeInstanceOf(Date);
    expect(delivered!.last_error).toBeNull();
    expect(Object.keys(delivered!.deliveries).sort()).toEqual(['a', 'b']);
  });

  it('14. the type filter returns only the named types', async () => {
    const [paid] = await enqueue(event({ type: 'invoice.paid' }));
    const [invited] = await enqueue(event({ type: 'member.invited' }));
    await enqueue(event({ type: 'org.created' }));

    const claimed = await claim(10, { types: ['invoice.paid', 'member.invited'] });
    expect(claimed.map((r) => r.id).sort()).toEqual([paid, invited].sort());
    const rest = await claim(10);
    expect(rest.map((r) => r.type)).toEqual(['org.created']);
  });

  it('15. the CHECK refuses a deliveries value that is not an object', async () => {
    const [id] = await enqueue(event());
    for (const bad of ['[]', '"text"', '1', 'null']) {
      await expect(
        t.sql.query(`UPDATE outbox_event SET deliveries = $1::jsonb WHERE id = $2`, [bad, id]),
      ).rejects.toMatchObject({ code: '23514', constraint: 'outbox_event_deliveries_is_object' });
    }
    await expect(
      t.sql.query(`UPDATE outbox_event SET deliveries = NULL WHERE id = $1`, [id]),
    ).rejects.toMatchObject({ code: '23502' });
    expect((await row(id))!.deliveries).toEqual({});
  });

  it('16b. pendingState and exactState report how long the oldest transaction has held the xmin horizon', async () => {
    const horizon = await holdHorizon(() => t.db.connect());
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      for (const state of [value(await t.repo.pendingState()), value(await t.repo.exactState())]) {
        expect(state.horizon.heldMs).toBeGreaterThanOrEqual(300);
        expect(state.horizon.deadTuples).toBeGreaterThanOrEqual(0);
      }
      await horizon.release();
      expect(value(await t.repo.pendingState()).horizon.heldMs).toBeNull();
    } finally {
      await horizon.release();
    }
  });

  it('16. pendingState reports the next due delay, the wait of the oldest due row and counts by state; rows in backoff are not lag', async () => {
    const empty = {
      due: 0,
      retrying: 0,
      inFlight: 0,
      expiredLeases: 0,
      parked: 0,
      dead: 0,
      blockedKeys: 0,
      orderedWaitMs: null,
      nextDueInMs: null,
      oldestDueWaitMs: null,
    };
    const horizon = { heldMs: null, deadTuples: expect.any(Number) };
    expect(value(await t.repo.pendingState())).toEqual({ ...empty, countLimit: 1000, horizon });
    expect(value(await t.repo.exactState({}))).toEqual({ ...empty, countLimit: null, horizon });
    expect(value(await t.repo.nextDue({}))).toBeNull();

    // Each row as the outbox's statements leave it: a failed one resting for 30 s, one claimed
    // with a lease (and so a due time) 20 s ahead, a dead one whose replay is 10 minutes away.
    const [retrying, leased, dead, delivered] = await enqueue(event(), event(), event(), event());
    await t.sql.query(
      `UPDATE outbox_event SET
         next_attempt_at = CASE id WHEN $1::uuid THEN now() + interval '30 seconds'
                                   WHEN $2::uuid THEN now() + interval '20 seconds'
                                   WHEN $3::uuid THEN now() + interval '10 minutes'
                                   ELSE next_attempt_at END,
         occurred_at = CASE id WHEN $1::uuid THEN now() - interval '10 days'
                               WHEN $2::uuid THEN now() - interval '5 minutes'
                               WHEN $4::uuid THEN now() - interval '1 day' ELSE occurred_at END,
         lease_expires_at = CASE id WHEN $2::uuid THEN now() + interval '20 seconds' END,
         attempts = CASE id WHEN $1::uuid THEN 4 WHEN $2::uuid THEN 1 ELSE attempts END,
         dead_at = CASE id WHEN $3::uuid THEN now() - interval '50 minutes' END,
         dispatched_at = CASE id WHEN $4::uuid THEN now() - interval '1 hour' END`,
      [retrying, leased, dead, delivered],
    );

    // The leased row is due first, in 20 s; nothing is due, so there is no lag although the
    // retrying row occurred ten days ago.
    let state = value(await t.repo.pendingState());
    expect(state).toMatchObject({
      due: 0,
      retrying: 1,
      inFlight: 1,
      expiredLeases: 0,
      dead: 1,
      oldestDueWaitMs: null,
      countLimit: 1000,
    });
    expect(state.nextDueInMs).toBeGreaterThan(19_000);
    expect(state.nextDueInMs).toBeLessThanOrEqual(20_000);
    const nextDue = value(await t.repo.nextDue());
    expect(nextDue).toBeGreaterThan(19_000);
    expect(nextDue).toBeLessThanOrEqual(20_000);

    // A dead row whose replay time came makes the next due delay 0, and is still not lag.
    await t.sql.query(
      `UPDATE outbox_event SET next_attempt_at = now() - interval '1 minute' WHERE id = $1`,
      [dead],
    );
    state = value(await t.repo.pendingState());
    expect(state).toMatchObject({ nextDueInMs: 0, oldestDueWaitMs: null, dead: 1 });
    expect(value(await t.repo.nextDue())).toBe(0);

    // A row due for 3 minutes, and one whose lease ended 2 minutes ago without a settle (due
    // again since its lease end).
    const [waiting, stalled] = await enqueue(event(), event());
    await t.sql.query(
      `UPDATE outbox_event SET
         next_attempt_at = now() - CASE id WHEN $1::uuid THEN interval '3 minutes'
                                           ELSE interval '2 minutes' END,
         lease_expires_at = CASE id WHEN $2::uuid THEN now() - interval '2 minutes' END,
         attempts = CASE id WHEN $2::uuid THEN 1 ELSE attempts END
       WHERE id IN ($1, $2)`,
      [waiting, stalled],
    );
    const counts = { due: 1, retrying: 1, inFlight: 1, expiredLeases: 1, dead: 1 };
    state = value(await t.repo.pendingState());
    expect(state).toMatchObject({ ...counts, nextDueInMs: 0, countLimit: 1000 });
    expect(state.oldestDueWaitMs).toBeGreaterThanOrEqual(180_000);
    // Loose above: the UPDATE and this read are separate statements on a possibly loaded machine.
    expect(state.oldestDueWaitMs).toBeLessThan(240_000);

    // The exact query agrees.
    const exact = value(await t.repo.exactState());
    expect(exact).toMatchObject({ ...counts, nextDueInMs: 0, countLimit: null });
    expect(exact.oldestDueWaitMs).toBeGreaterThanOrEqual(180_000);
    expect(exact.oldestDueWaitMs).toBeLessThan(240_000);

    // The types filter applies to every figure.
    const [other] = await enqueue(event({ type: 'org.created' }));
    expect(value(await t.repo.pendingState({ types: ['org.created'] }))).toMatchObject({
      due: 1,
      retrying: 0,
      inFlight: 0,
      expiredLeases: 0,
      dead: 0,
      nextDueInMs: 0,
    });
    await t.sql.query(
      `UPDATE outbox_event SET next_attempt_at = now() + interval '1 hour' WHERE id = $1`,
      [other],
    );
    const filtered = value(await t.repo.pendingState({ types: ['org.created'] }));
    expect(filtered).toMatchObject({ due: 0, retrying: 1, oldestDueWaitMs: null });
    expect(filtered.nextDueInMs).toBeGreaterThan(3_500_000);
    const filteredNextDue = value(await t.repo.nextDue({ types: ['org.created'] }));
    expect(filteredNextDue).toBeGreaterThan(3_500_000);
    expect(filteredNextDue).toBeLessThanOrEqual(3_600_000);
    expect(value(await t.repo.nextDue({ types: ['no.such.type'] }))).toBeNull();
  });

  it('16b. pendingState counts stop at countLimit, and say so; exactState counts them all', async () => {
    // Five rows in each state, as the outbox's statements leave them.
    await t.sql.query(
      `INSERT INTO outbox_event
         (id, type, aggregate_type, aggregate_id, payload, attempts,
          next_attempt_at, lease_expires_at, dead_at)
       SELECT gen_random_uuid(), 'bulk', 'bulk', g::text, '{}'::jsonb,
              CASE state WHEN 'due' THEN 0 ELSE 1 END,
              CASE state WHEN 'due' THEN now() - interval '1 minute'
                         WHEN 'retrying' THEN now() + interval '1 hour'
                         WHEN 'in_flight' THEN now() + interval '1 minute'
                         WHEN 'expired' THEN now() - interval '2 minutes'
                         WHEN 'dead' THEN now() + interval '6 hours' END,
              CASE state WHEN 'in_flight' THEN now() + interval '1 minute'
                         WHEN 'expired' THEN now() - interval '2 minutes' END,
              CASE state WHEN 'dead' THEN now() END
       FROM unnest(ARRAY['due', 'retrying', 'in_flight', 'expired', 'dead']) AS state,
            generate_series(1, 5) AS g`,
    );
    const five = { due: 5, retrying: 5, inFlight: 5, expiredLeases: 5, dead: 5 };

    expect(value(await t.repo.pendingState({ countLimit: 3 }))).toMatchObject({
      due: 3,
      retrying: 3,
      inFlight: 3,
      expiredLeases: 3,
      dead: 3,
      countLimit: 3,
      nextDueInMs: 0,
    });
    expect(value(await t.repo.pendingState({ countLimit: 5 }))).toMatchObject({
      ...five,
      countLimit: 5,
    });
    expect(value(await t.repo.pendingState())).toMatchObject({ ...five, countLimit: 1000 });
    expect(value(await t.repo.exactState())).toMatchObject({ ...five, countLimit: null });
    // Six leases in flight and four retrying rows share the range beyond now(); the cap applies
    // to what remains once the leases are taken out.
    await t.sql.query(
      `UPDATE outbox_event
       SET lease_expires_at = next_attempt_at
       WHERE id = (SELECT id FROM outbox_event
                   WHERE lease_expires_at IS NULL AND dead_at IS NULL
                     AND next_attempt_at > now()
                   LIMIT 1)`,
    );
    expect(value(await t.repo.pendingState({ countLimit: 4 }))).toMatchObject({
      retrying: 4,
      inFlight: 4,
    });
    expect(value(await t.repo.pendingState({ countLimit: 6 }))).toMatchObject({
      retrying: 4,
      inFlight: 6,
    });
    await expect(t.repo.pendingState({ countLimit: 0 })).rejects.toThrow(RangeError);
  });

  it('17. the sweep removes delivered rows past the cutoff and keeps newer delivered, live and dead rows', async () => {
    const ids = await enqueue(...Array.from({ length: 9 }, () => event()));
    const [old1, old2, old3, old4, old5, recent, live, dead, deadOld] = ids;
    await t.sql.query(
      `UPDATE outbox_event SET dispatched_at = now() - interval '2 hours' WHERE id = ANY($1::uuid[])`,
      [[old1, old2, old3, old4, old5]],
    );
    await t.sql.query(
      `UPDATE outbox_event SET dispatched_at = now() - interval '10 minutes' WHERE id = $1`,
      [recent],
    );
    await t.sql.query(
      `UPDATE outbox_event SET dead_at = now() - interval '30 days', occurred_at = now() - interval '30 days'
       WHERE id = ANY($1::uuid[])`,
      [[dead, deadOld]],
    );

    expect(value(await t.retention.sweep({ retentionMs: HOUR, batchSize: 2 }))).toBe(5);
    const { rows } = await t.sql.query<{ id: string }>('SELECT id FROM outbox_event');
    expect(rows.map((r) => r.id).sort()).toEqual([recent, live, dead, deadOld].sort());
    expect(value(await t.retention.sweep({ retentionMs: HOUR, batchSize: 2 }))).toBe(0);
  });

  it('18. a sweep and a claim running together never block each other', async () => {
    const ids = await enqueue(...Array.from({ length: 6 }, () => event()));
    const expired = ids.slice(0, 4);
    const live = ids.slice(4);
    await t.sql.query(
      `UPDATE outbox_event SET dispatched_at = now() - interval '2 hours' WHERE id = ANY($1::uuid[])`,
      [expired],
    );
    // Stores that error instead of waiting on any lock, so a block fails the test: their own
    // lock_timeout (SET LOCAL), which a transaction pooler keeps, unlike a session setting.
    const impatientRepo = new OutboxLeaseStore(t.db.dataSource, {
      channel: CHANNEL,
      lockTimeoutMs: 2000,
    });
    const impatientRetention = new RetentionStore(t.db.dataSource, { lockTimeoutMs: 2000 });
    const claimer = await t.db.connect();
    const sweeper = await t.db.connect();
    try {
      // An open claim holding one live row, and an open sweep holding two expired rows.
      await claimer.query('BEGIN');
      const held = await claimer.query(CLAIM, [1, 60_000, null, null, []]);
      expect(held.rows.map((r) => r.id)).toEqual([live[0]]);
      await sweeper.query('BEGIN');
      await sweeper.query(
        `DELETE FROM outbox_event WHERE id IN (SELECT id FROM outbox_event WHERE id = ANY($1::uuid[]) FOR UPDATE)`,
        [expired.slice(0, 2)],
      );

      const [swept, claimed] = await Promise.all([
        impatientRetention.sweep({ retentionMs: HOUR, batchSize: 10 }),
        impatientRepo.claim({ limit: 10, ...LEASE }),
      ]);
      expect(value(swept)).toBe(2);
      expect(value(claimed).map((r) => r.id)).toEqual([live[1]]);
    } finally {
      await claimer.query('ROLLBACK');
      await sweeper.query('ROLLBACK');
    }
  });

  it('19. with 100,000 delivered rows and 100 live rows, the claim plan reads the due indexes', async () => {
    await t.sql.query(
      `INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload, dispatched_at, occurred_at)
       SELECT gen_random_uuid(), 'bulk.delivered', 'bulk', g::text, '{}'::jsonb,
              now() - interval '1 day', now() - interval '2 days'
       FROM generate_series(1, 100000) AS g`,
    );
    await enqueue(...Array.from({ length: 100 }, (_, i) => event({ aggregateId: `live-${i}` })));
    await t.sql.query('ANALYZE outbox_event');

    for (const types of [null, ['invoice.paid', 'member.invited']]) {
      const { rows } = await t.sql.query(`EXPLAIN (FORMAT JSON) ${CLAIM}`, [
        100,
        60_000,
        types,
        null,
        [],
      ]);
      const nodes = planNodes(rows[0]['QUERY PLAN'][0].Plan);
      expect(nodes.filter((n) => n['Node Type'] === 'Seq Scan')).toEqual([]);
      // The due indexes pick the rows; the primary key is how the update reaches them; the
      // ordering index answers whether an earlier event of a claimed row's key holds it.
      const indexes = new Set(nodes.flatMap((n) => n['Index Name'] ?? []));
      expect([...indexes].sort()).toEqual([
        'outbox_event_dead_retry_idx',
        'outbox_event_due_idx',
        'outbox_event_ordering_idx',
        'outbox_event_pkey',
      ]);
    }
    expect((await claim(100)).length).toBe(100);
  });

  it('20. last_error holds scrubbed, bounded text', async () => {
    const [id] = await enqueue(event({ type: 'secretive' }));
    const [claimed] = await claim();
    const secretError = new Error(
      `connect to postgres://app:pa55word@db:5432/app failed; Authorization: Bearer tok_ABCDEFGH123; ${'x'.repeat(5000)}`,
    );
    await failOnce({
      id,
      attempts: claimed.attempts,
      failedHandlers: ['h'],
      error: secretError,
      dead: claimed.attempts >= 1,
    });
    const stored = (await row(id))!.last_error as string;
    expect(stored).toContain('postgres://[redacted]@db:5432/app failed');
    expect(stored).not.toContain('pa55word');
    expect(stored).not.toContain('tok_ABCDEFGH123');
    expect(stored.length).toBeLessThanOrEqual(2000);
    const [announcement] = await deadEvents();
    expect(announcement.lastError).toBe(stored);
  });
});

describe('outbox lease proof: shutdown', () => {
  it('21. release gives claimed rows back at once without counting the attempt, and never a re-claimed one', async () => {
    const [kept, given] = await enqueue(event(), event());
    const claimed = await claim();
    expect(claimed.map((r) => r.attempts)).toEqual([1, 1]);
    await expireLease(kept);
    const [reclaimed] = await claim();
    expect(reclaimed).toMatchObject({ id: kept, attempts: 2 });

    const outcome = value(
      await t.repo.release(claimed.map((r) => ({ id: r.id, attempts: r.attempts }))),
    );
    expect(outcome).toEqual({ settled: [given], stale: [kept] });
    expect(await row(given)).toMatchObject({ attempts: 0, lease_expires_at: null });
    // Due again at once, not when the lease would have ended.
    expect((await row(given))!.next_attempt_at.getTime()).toBeLessThanOrEqual(
      (await sqlNow()).getTime(),
    );
    expect((await row(kept))!.lease_expires_at).toEqual(reclaimed.leaseExpiresAt);
    expect((await claim()).map((r) => [r.id, r.attempts])).toEqual([[given, 1]]);
  });
});

async function sqlNow(): Promise<Date> {
  const { rows } = await t.sql.query<{ now: Date }>('SELECT clock_timestamp() AS now');
  return rows[0].now;
}

/** Polls a condition that depends on time passing in the database; gives up after 15 s. */
async function waitFor(condition: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not reached within 15 s');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

function planNodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(planNodes)];
}
