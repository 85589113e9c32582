import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Client } from 'pg';
import { DataSource } from 'typeorm';
import { OnOutboxEvent, OutboxPublisher, OutboxLeaseStore, type NewOutboxEvent } from '@app/outbox';
import { useOutboxApp } from './support/outbox-app';

/**
 * What an emit does for ordered handlers: each event they receive takes the next place in its
 * key, in the order the emitting transactions commit, and an event none of whose handlers can
 * run yet rests parked until the event ahead of it is done.
 */

@Injectable()
class Handlers {
  @OnOutboxEvent('ledger', { events: ['account.credited', 'account.noted'], ordered: true })
  ledger() {}

  @OnOutboxEvent('mailer', { events: ['account.noted'] })
  mailer() {}
}

const t = useOutboxApp(
  { outbox: { autoStart: false, retention: { enabled: false } }, providers: [Handlers] },
  { truncateEach: ['outbox_event', 'outbox_ordering_key', 'outbox_ordering_wait'] },
);

function credited(key: string, overrides: Partial<NewOutboxEvent> = {}): NewOutboxEvent {
  return {
    type: 'account.credited',
    aggregateType: 'account',
    aggregateId: 'a-1',
    orderingKey: key,
    payload: {},
    ...overrides,
  };
}

function emitIn(events: NewOutboxEvent[], hold?: Promise<void>): Promise<string[]> {
  return t.app.get(DataSource).transaction(async (manager) => {
    const ids = await t.app.get(OutboxPublisher).emit(events, { manager });
    await hold;
    return ids;
  });
}

interface Placed {
  id: string;
  key: string;
  position: number | null;
  parked: boolean;
}

async function placed(sql: Client): Promise<Placed[]> {
  const { rows } = await sql.query<Placed>(
    `SELECT id, coalesce(ordering_key, aggregate_type || ':' || aggregate_id) AS key,
            ordering_position::int AS position, next_attempt_at = '9999-12-31 00:00:00+00' AS parked
     FROM outbox_event ORDER BY key, ordering_position, id`,
  );
  return rows;
}

describe('an emit for ordered handlers', () => {
  it('gives each event the next place in its key, and parks those whose handlers are all held', async () => {
    const [first, second] = await emitIn([credited('k1'), credited('k1')]);
    const [third] = await emitIn([credited('k1')]);
    const [other] = await emitIn([credited('k2')]);
    // One handler of account.noted is not ordered: the event can always run something.
    const [noted] = await emitIn([credited('k1', { type: 'account.noted' })]);
    // Without an ordered handler an event takes no place.
    const [plain] = await emitIn([credited('k1', { type: 'account.opened' })]);

    expect(await placed(t.sql)).toEqual([
      { id: first, key: 'k1', position: 1, parked: false },
      { id: second, key: 'k1', position: 2, parked: true },
      { id: third, key: 'k1', position: 3, parked: true },
      { id: noted, key: 'k1', position: 4, parked: false },
      { id: plain, key: 'k1', position: null, parked: false },
      { id: other, key: 'k2', position: 1, parked: false },
    ]);
    const { rows: sequencedFor } = await t.sql.query(
      `SELECT DISTINCT ordered_for FROM outbox_event WHERE ordering_position IS NOT NULL`,
    );
    expect(sequencedFor).toEqual([{ ordered_for: ['ledger'] }]);
    const { rows } = await t.sql.query(
      `SELECT handler, key, waiting::int AS waiting FROM outbox_ordering_wait ORDER BY key`,
    );
    expect(rows).toEqual([
      { handler: 'ledger', key: 'k1', waiting: 4 },
      { handler: 'ledger', key: 'k2', waiting: 1 },
    ]);
  });

  it('takes no place for an event emitted again (a duplicate)', async () => {
    const id = randomUUID();
    await emitIn([credited('k1', { id })]);
    await emitIn([credited('k1', { id })]);
    await emitIn([credited('k1', { id }), credited('k1', { id })]);
    expect((await placed(t.sql)).map((p) => p.position)).toEqual([1]);
    const { rows } = await t.sql.query(`SELECT waiting::int AS waiting FROM outbox_ordering_wait`);
    expect(rows).toEqual([{ waiting: 1 }]);
  });

  it('orders by commit: a transaction that emits first but commits last takes the later place', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const early = emitIn([credited('k1')], held);
    // Let the held transaction take its place first.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const late = emitIn([credited('k1')]);
    await new Promise((resolve) => setTimeout(resolve, 200));
    // The second one waits for the first: the key's place is taken until that commit.
    expect(await placed(t.sql)).toEqual([]);
    release();
    const [[earlyId], [lateId]] = await Promise.all([early, late]);
    expect((await placed(t.sql)).map((p) => [p.id, p.position])).toEqual([
      [earlyId, 1],
      [lateId, 2],
    ]);
  });

  it("keeps each producer's order within a key while producers race over the same keys", async () => {
    const producers = 3;
    const perProducer = 40;
    const emitted = await Promise.all(
      Array.from({ length: producers }, async (_, p) => {
        const mine: Array<{ key: string; id: string }> = [];
        for (let i = 0; i < perProducer; i++) {
          const key = `k${(i * 7 + p) % 5}`;
          const pair = i % 4 === 0;
          const ids = await emitIn(pair ? [credited(key), credited(key)] : [credited(key)]);
          for (const id of ids) mine.push({ key, id });
        }
        return mine;
      }),
    );
    const positions = new Map((await placed(t.sql)).map((p) => [p.id, p.position!]));
    for (const mine of emitted) {
      for (const key of new Set(mine.map((m) => m.key))) {
        const inOrder = mine.filter((m) => m.key === key).map((m) => positions.get(m.id)!);
        expect(inOrder).toEqual([...inOrder].sort((a, b) => a - b));
      }
    }
    // Every key's places are 1..n with no gap and no repeat.
    for (const key of ['k0', 'k1', 'k2', 'k3', 'k4']) {
      const { rows } = await t.sql.query<{ positions: number[] }>(
        `SELECT array_agg(ordering_position::int ORDER BY ordering_position) AS positions
         FROM outbox_event WHERE ordering_key = $1`,
        [key],
      );
      const list = rows[0].positions;
      expect(list).toEqual(list.map((_, i) => i + 1));
    }
  });
});

describe('a claim of events an ordered handler receives', () => {
  /** Every event due now, as if parked ones had been freed; each claim a fresh lease. */
  async function claimAll(includeDead: boolean, skipDead: string[] = []) {
    await t.sql.query(
      `UPDATE outbox_event SET next_attempt_at = now() - interval '1 second'
       WHERE dispatched_at IS NULL`,
    );
    const result = await new OutboxLeaseStore(t.db.dataSource).claim({
      limit: 100,
      leaseMs: 60_000,
      includeDead,
      skipDead,
    });
    if (!result.ok) throw result.error;
    return Object.fromEntries(result.value.map((r) => [r.id, r.held]));
  }

  it.each([['through the claim of live and dead rows', true]])(
    'tells which ordered handlers must wait for an earlier event of the key, %s',
    async (_, dead) => {
      const [first, second, third] = await emitIn([credited('k1'), credited('k1'), credited('k1')]);
      const [noted] = await emitIn([credited('k1', { type: 'account.noted' })]);
      const [other] = await emitIn([credited('k2')]);
      const [plain] = await emitIn([credited('k1', { type: 'account.opened' })]);
      expect(await claimAll(dead)).toEqual({
        [first]: [],
        [second]: ['ledger'],
        [third]: ['ledger'],
        [noted]: ['ledger'],
        [other]: [],
        [plain]: [],
      });

      // The first delivered to ledger: the second may run; a dead second holds the rest...
      // As a settle records it: delivered, and no longer waited on by ledger.
      await t.sql.query(
        `UPDATE outbox_event SET deliveries = '{"ledger": "2026-01-01T00:00:00Z"}',
                                 ordered_for = array_remove(ordered_for, 'ledger')
         WHERE id = $1`,
        [first],
      );
      await t.sql.query(`UPDATE outbox_event SET dead_at = now() WHERE id = $1`, [second]);
      expect(await claimAll(dead)).toMatchObject({ [first]: [], [third]: ['ledger'] });
      // ...unless ledger skips dead events; a discarded event holds nothing.
      expect(await claimAll(dead, ['ledger'])).toMatchObject({ [third]: [], [noted]: ['ledger'] });
      await t.sql.query(`UPDATE outbox_event SET discarded_at = now() WHERE id = $1`, [second]);
      expect(await claimAll(dead)).toMatchObject({ [third]: [], [noted]: ['ledger'] });
    },
  );

  /** A live claim through the function, of what is due now (nothing made due). */
  async function claimLive() {
    const result = await new OutboxLeaseStore(t.db.dataSource).claim({
      limit: 100,
      leaseMs: 60_000,
      includeDead: false,
    });
    if (!result.ok) throw result.error;
    return result.value.map((r) => ({ id: r.id, held: r.held, after: r.after }));
  }

  it("chains a key's events it takes, holding for each only what an event outside the claim holds", async () => {
    await t.sql.query('TRUNCATE outbox_event');
    const [first, second, third] = await emitIn([credited('k1'), credited('k1'), credited('k1')]);
    const [noted] = await emitIn([credited('k1', { type: 'account.noted' })]);
    const [other] = await emitIn([credited('k2')]);
    // Emitted behind `first`, the ledger-only events are parked: the claim takes them after it,
    // chained. `noted` is due (its mailer is not ordered): claimed for its mailer, it is not
    // chained, and its ledger waits for the chain.
    expect(await claimLive()).toEqual([
      { id: first, held: [], after: null },
      { id: second, held: [], after: first },
      { id: third, held: [], after: second },
      { id: noted, held: ['ledger'], after: null },
      { id: other, held: [], after: null },
    ]);

    // With `first` leased elsewhere and the others due, each waits for the events before it.
    await t.sql.query(
      `UPDATE outbox_event SET next_attempt_at = CASE WHEN id = $1 THEN now() + interval '1 minute'
                                                      ELSE now() - interval '1 second' END`,
      [first],
    );
    expect(await claimLive()).toEqual([
      { id: second, held: ['ledger'], after: null },
      { id: third, held: ['ledger'], after: null },
      { id: noted, held: ['ledger'], after: null },
      { id: other, held: [], after: null },
    ]);
  });
});
