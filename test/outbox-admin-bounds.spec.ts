import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import {
  OUTBOX_EVENT_DISCARDED,
  OUTBOX_EVENT_REPLAYED,
  OutboxAdmin,
  OutboxAdminChangeInProgressError,
} from '@app/outbox';
import { AdminStore } from '@app/outbox/store/admin/admin.store';
import {
  adminRefusal,
  claimAdminChange,
  insertDeadRows,
  useAdminApp,
  waitingForReplay,
} from './support/admin-fixture';
import { eventually } from './support/outbox-app';

/**
 * A replay or discard by filter is bounded: it stops at `maxRows` or its time budget and answers
 * a cursor that the next call goes on from, with exact counts by type; and only one runs at a
 * time, whichever process starts a second.
 */

const t = useAdminApp({
  // A long lock timeout: the concurrency test holds a row lock that the first change waits on.
  testing: { lockTimeoutMs: 20_000 },
  truncateEach: ['outbox_event', 'outbox_admin_change'],
});

/** `count` dead rows of `type` that `mailer` failed, waiting for a replay. */
const insertDead = (type: string, count: number) => insertDeadRows(t.db.dataSource, type, count);

/** The events a change recorded (`outbox.event.replayed` / `discarded`): which, and their type. */
async function recorded(kind: string): Promise<{ eventId: string; type: string }[]> {
  return t.db.dataSource.query(
    `SELECT payload ->> 'eventId' AS "eventId", payload ->> 'type' AS type
     FROM outbox_event WHERE type = $1 ORDER BY payload ->> 'eventId'`,
    [kind],
  );
}

function byType(rows: { type: string }[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const { type } of rows) counts[type] = (counts[type] ?? 0) + 1;
  return counts;
}

describe('a change by filter is bounded', () => {
  it('stops at maxRows with a cursor, and the call with the cursor changes exactly the rest', async () => {
    await insertDead('member.invited', 1200);
    await insertDead('invoice.paid', 300);
    const selector = { filter: { handler: 'mailer' } };

    const first = await t.admin.replay(selector, { maxRows: 700, actor: 'ops:ana' });
    const firstRecorded = await recorded(OUTBOX_EVENT_REPLAYED);
    expect(first).toMatchObject({ dryRun: false, count: 700, stoppedBy: 'maxRows' });
    expect(first.cursor).toEqual(expect.any(String));
    expect(firstRecorded).toHaveLength(700);
    // Exact counts by type: what the recorded events say was replayed.
    expect(first.countsByType).toEqual(byType(firstRecorded));
    // The sample is capped, and it is the first ids changed (they go by id).
    expect(first.sampleIds).toHaveLength(100);
    expect(first.ids).toEqual(first.sampleIds);
    expect(first.sampleIds).toEqual(
      firstRecorded
        .map((r) => r.eventId)
        .sort()
        .slice(0, 100),
    );

    const rest = await t.admin.replay(selector, { after: first.cursor!, actor: 'ops:ana' });
    expect(rest).toMatchObject({ count: 800, cursor: null, stoppedBy: null });
    const all = await recorded(OUTBOX_EVENT_REPLAYED);
    // No event twice, none missed: 1,500 recorded for 1,500 distinct dead events.
    expect(all).toHaveLength(1500);
    expect(new Set(all.map((r) => r.eventId)).size).toBe(1500);
    expect(byType(all)).toEqual({ 'member.invited': 1200, 'invoice.paid': 300 });
    const firstIds = new Set(firstRecorded.map((r) => r.eventId));
    expect(rest.countsByType).toEqual(byType(all.filter((r) => !firstIds.has(r.eventId))));
    expect(await waitingForReplay(t.db.dataSource)).toBe(0);
  });

  it('bounds a dry run the same way, changing nothing', async () => {
    await insertDead('member.invited', 1200);
    const dry = await t.admin.discard(
      { filter: { types: ['member.invited'] } },
      { reason: 'x', dryRun: true, maxRows: 1000 },
    );
    expect(dry).toMatchObject({
      dryRun: true,
      count: 1000,
      countsByType: { 'member.invited': 1000 },
      stoppedBy: 'maxRows',
    });
    const rest = await t.admin.discard(
      { filter: { types: ['member.invited'] } },
      { reason: 'x', dryRun: true, after: dry.cursor! },
    );
    expect(rest).toMatchObject({ count: 200, cursor: null });
    expect(await recorded(OUTBOX_EVENT_DISCARDED)).toEqual([]);
  });

  it('stops once its time budget has passed, after the batch running then', async () => {
    await insertDead('member.invited', 1200);
    const first = await t.admin.discard(
      { filter: { types: ['member.invited'] } },
      { reason: 'poison', timeBudgetMs: 1 },
    );
    // The first batch always runs; none starts after the budget.
    expect(first).toMatchObject({ count: 500, stoppedBy: 'timeBudget' });
    expect(first.cursor).toEqual(expect.any(String));
    expect(await recorded(OUTBOX_EVENT_DISCARDED)).toHaveLength(500);

    const rest = await t.admin.discard(
      { filter: { types: ['member.invited'] } },
      { reason: 'poison', after: first.cursor! },
    );
    expect(rest).toMatchObject({ count: 700, cursor: null, stoppedBy: null });
    const all = await recorded(OUTBOX_EVENT_DISCARDED);
    expect(new Set(all.map((r) => r.eventId)).size).toBe(1200);
  });

  it('reports counts by type with ids too, and refuses bounds there', async () => {
    await insertDead('member.invited', 2);
    await insertDead('invoice.paid', 1);
    const ids = (
      await t.db.dataSource.query<{ id: string }[]>(`SELECT id FROM outbox_event ORDER BY id`)
    ).map((r) => r.id);
    const change = await t.admin.replay({ ids });
    expect(change).toEqual({
      dryRun: false,
      count: 3,
      countsByType: { 'member.invited': 2, 'invoice.paid': 1 },
      sampleIds: ids,
      ids,
      unchanged: [],
      cursor: null,
      stoppedBy: null,
    });
    const error = await adminRefusal(() => t.admin.replay({ ids }, { maxRows: 5 }));
    expect(error.field).toBe('options.maxRows');
  });

  it.each([
    ['options.maxRows', { maxRows: 0 }],
    ['options.maxRows', { maxRows: 100_001 }],
    ['options.maxRows', { maxRows: 1.5 }],
    ['options.maxRows', { maxRows: '10' }],
    ['options.timeBudgetMs', { timeBudgetMs: 0 }],
    ['options.timeBudgetMs', { timeBudgetMs: 300_001 }],
    ['options.after', { after: 'not-a-cursor' }],
    // A page cursor of `list` is not a change's cursor.
    [
      'options.after',
      {
        after: Buffer.from(
          JSON.stringify(['dead-letters', '2026-01-01T00:00:00.000000Z', randomUUID()]),
        ).toString('base64url'),
      },
    ],
  ])('refuses %s %j, naming it, before writing anything', async (field, options) => {
    await insertDead('member.invited', 1);
    const error = await adminRefusal(() =>
      t.admin.replay({ filter: { types: ['member.invited'] } }, options as never),
    );
    expect(error.field).toBe(field);
    expect(await recorded(OUTBOX_EVENT_REPLAYED)).toEqual([]);
  });
});

describe('one change by filter at a time', () => {
  it('refuses a second change by filter from another process while the first runs; it changes nothing', async () => {
    await insertDead('member.invited', 600);
    await insertDead('invoice.paid', 3);
    // Another process: its own DataSource and OutboxAdmin.
    const other = new DataSource({ type: 'postgres', url: t.db.url });
    await other.initialize();
    const blocker = t.db.dataSource.createQueryRunner();
    try {
      const otherAdmin = new OutboxAdmin(new AdminStore(other));
      // Makes the first change slow: its first batch waits for a row another transaction holds.
      await blocker.connect();
      await blocker.startTransaction();
      await blocker.query(
        `SELECT id FROM outbox_event WHERE type = 'member.invited' ORDER BY id LIMIT 1 FOR UPDATE`,
      );
      const first = t.admin.replay({ filter: { types: ['member.invited'] } }, { actor: 'ops:ana' });
      await eventually('the first change waits for the lock', async () => {
        const [{ waiting }] = await t.db.dataSource.query<{ waiting: number }[]>(
          `SELECT count(*)::int AS waiting FROM pg_stat_activity
           WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        return waiting > 0;
      });

      const second = await otherAdmin
        .discard({ filter: { types: ['invoice.paid'] } }, { reason: 'x', actor: 'ops:bo' })
        .catch((e: unknown) => e);
      expect(second).toBeInstanceOf(OutboxAdminChangeInProgressError);
      expect((second as OutboxAdminChangeInProgressError).running).toMatchObject({
        kind: 'replay',
        actor: 'ops:ana',
      });
      expect((second as Error).message).toMatch(
        /cannot discard by filter now: a replay by filter by ops:ana, started at .* is running/,
      );
      // A dry run changes nothing: it is not refused.
      expect(
        (
          await otherAdmin.discard(
            { filter: { types: ['invoice.paid'] } },
            { reason: 'x', dryRun: true },
          )
        ).count,
      ).toBe(3);

      await blocker.commitTransaction();
      expect(await first).toMatchObject({ count: 600, cursor: null });
      // The refused discard changed nothing.
      expect(await recorded(OUTBOX_EVENT_DISCARDED)).toEqual([]);
      const [{ discarded }] = await t.db.dataSource.query<{ discarded: number }[]>(
        `SELECT count(*)::int AS discarded FROM outbox_event WHERE discarded_at IS NOT NULL`,
      );
      expect(discarded).toBe(0);

      // The first released its claim as it ended: the second may run now.
      expect(await t.db.dataSource.query('SELECT * FROM outbox_admin_change')).toEqual([]);
      expect(
        (await otherAdmin.discard({ filter: { types: ['invoice.paid'] } }, { reason: 'x' })).count,
      ).toBe(3);
    } finally {
      if (blocker.isTransactionActive) await blocker.rollbackTransaction();
      await blocker.release();
      await other.destroy();
    }
  });

  it('releases the claim when the change fails, and takes over the claim of a process that died', async () => {
    await insertDead('member.invited', 2);
    await claimAdminChange(t.db.dataSource, 'discard', 'cli:ops');
    await expect(t.admin.replay({ filter: { types: ['member.invited'] } })).rejects.toThrow(
      OutboxAdminChangeInProgressError,
    );
    // Its process died: the claim expired.
    await t.db.dataSource.query(
      `UPDATE outbox_admin_change SET expires_at = now() - interval '1 second'`,
    );
    expect((await t.admin.replay({ filter: { types: ['member.invited'] } })).count).toBe(2);
    expect(await t.db.dataSource.query('SELECT * FROM outbox_admin_change')).toEqual([]);

    // A change that fails part way still releases its claim.
    await t.db.dataSource.query(`ALTER TABLE outbox_event RENAME TO outbox_event_away`);
    try {
      await expect(
        t.admin.discard({ filter: { types: ['member.invited'] } }, { reason: 'x' }),
      ).rejects.toThrow(/discardDeadLetters failed/);
    } finally {
      await t.db.dataSource.query(`ALTER TABLE outbox_event_away RENAME TO outbox_event`);
    }
    expect(await t.db.dataSource.query('SELECT * FROM outbox_admin_change')).toEqual([]);
  });
});
