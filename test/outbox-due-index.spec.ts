import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { DataSource, type MigrationInterface } from 'typeorm';
import {
  OutboxDueIndex1765000000000,
  CreateOutboxEvent1764400000000,
  OUTBOX_MIGRATIONS,
  OutboxLeaseStore,
} from '@app/outbox';
import { CLAIM, CLAIM_LIVE_CALL, claimParameters } from '@app/outbox/store/lease/claim.sql';
import { headAfter } from '@app/outbox/engine/due-range';
import { NEXT_DUE, PENDING_STATE, pendingStateParameters } from '@app/outbox/store/lease/state.sql';
import { dropDatabase, withAdminClient } from './support/admin-client';
import { withDatabase } from './support/database-url';
import { migratedIndexes } from './support/schema-catalog';
import { useTestDatabase } from './support/test-database';
import { ADMIN_URL_ENV, TEMPLATE_ENV, requireRunEnv } from './support/test-run';
import { holdHorizon } from './support/horizon';
import { nestedPlans, planNodes, rowsRead, tableScans, type PlanNode } from './support/query-plans';
import { value } from './support/result-value';

/**
 * The due indexes: a claim or a plan reads the rows it needs, not the rows resting ahead of them
 * in backoff or under a lease, and a 0.1 table is upgraded in place. Reads are judged from
 * EXPLAIN ANALYZE row counts, never from time.
 */

const BACKLOG = 200_000;
const DUE = 100;
const LEASE_MS = 60_000;

const t = useTestDatabase();

/**
 * `count` undelivered rows that occurred a day ago (so in occurrence order they all come before
 * the due rows) and are not claimable now: in backoff after a failure, or under a lease.
 */
async function insertResting(sql: Client, state: 'backoff' | 'leased', count = BACKLOG) {
  await sql.query(
    `INSERT INTO outbox_event
       (id, type, aggregate_type, aggregate_id, payload, occurred_at, attempts,
        next_attempt_at, lease_expires_at, last_error)
     SELECT gen_random_uuid(), 'bulk.resting', 'bulk', g::text, '{}'::jsonb,
            now() - interval '1 day', 1,
            now() + interval '1 minute' + g * interval '10 milliseconds',
            CASE WHEN $2 THEN now() + interval '1 minute' + g * interval '10 milliseconds' END,
            CASE WHEN $2 THEN NULL ELSE 'receiver down' END
     FROM generate_series(1, $1::int) AS g`,
    [count, state === 'leased'],
  );
}

/** `count` rows enqueued just now and never claimed: due now. */
async function insertDue(sql: Client, count = DUE): Promise<string[]> {
  const { rows } = await sql.query<{ id: string }>(
    `INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload)
     SELECT gen_random_uuid(), 'bulk.due', 'bulk', g::text, '{}'::jsonb
     FROM generate_series(1, $1::int) AS g
     RETURNING id`,
    [count],
  );
  return rows.map((row) => row.id);
}

/** The claim under EXPLAIN ANALYZE, rolled back: its plan and the ids it would have claimed. */
async function explainClaim(
  sql: Client,
  limit: number,
  types: string[] | null,
  dueFrom: number | null = null,
) {
  await sql.query('BEGIN');
  try {
    const { rows } = await sql.query(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${CLAIM}`,
      claimParameters({ limit, leaseMs: LEASE_MS, types: types ?? undefined, dueFrom }),
    );
    // now() is the transaction's start, so the rows this claim leased are exactly those whose
    // lease ends one lease from now; the resting leases end later.
    const { rows: leased } = await sql.query<{ id: string }>(
      `SELECT id FROM outbox_event
       WHERE lease_expires_at = now() + make_interval(secs => $1 / 1000.0)`,
      [LEASE_MS],
    );
    return { plan: rows[0]['QUERY PLAN'][0].Plan as PlanNode, claimed: leased.map((r) => r.id) };
  } finally {
    await sql.query('ROLLBACK');
  }
}

describe('the claim reads the due indexes', () => {
  beforeEach(async () => {
    await t.sql.query('TRUNCATE outbox_event');
  });

  // The bound: the due-index scans return exactly the rows claimed and the update reads each of
  // them once more through the primary key, so a claim of N rows reads at most 2 N table rows.
  // Anything read and discarded on the way (rows resting ahead in index order, rows held by a
  // lease) shows up as "Rows Removed by Filter" and breaks the bound, however few they are
  // compared with the backlog.
  it.each([
    ['in backoff', 'backoff'],
    ['under a lease (in flight)', 'leased'],
  ] as const)(
    'with 200,000 rows %s and 100 due, a claim of 100 reads at most 200 rows and takes the 100',
    async (_, state) => {
      await insertResting(t.sql, state);
      const due = await insertDue(t.sql);
      await t.sql.query('ANALYZE outbox_event');

      for (const types of [null, ['bulk.due', 'bulk.resting']]) {
        const { plan, claimed } = await explainClaim(t.sql, DUE, types);
        const scans = tableScans(plan);
        expect(scans.filter((scan) => scan['Node Type'] === 'Seq Scan')).toEqual([]);
        const read = scans.reduce((sum, scan) => sum + rowsRead(scan), 0);
        expect(read).toBeLessThanOrEqual(2 * DUE);
        expect(claimed.sort()).toEqual([...due].sort());
      }

      // Outside EXPLAIN: the claim takes exactly the due rows, and then nothing.
      const repo = new OutboxLeaseStore(t.db.dataSource);
      const claimed = value(await repo.claim({ limit: DUE, leaseMs: LEASE_MS }));
      expect(claimed.map((r) => r.id).sort()).toEqual([...due].sort());
      expect(value(await repo.claim({ limit: DUE, leaseMs: LEASE_MS }))).toEqual([]);
    },
  );
});

describe('the claim while a long transaction holds the xmin horizon', () => {
  const DEAD_ENTRIES = 20_000;

  beforeEach(async () => {
    await t.sql.query('TRUNCATE outbox_event');
  });

  /** Buffers the scans of the live due index touched: its own pages and the heap rows it checked. */
  function dueIndexBuffers(plan: PlanNode): number {
    return planNodes(plan)
      .filter((node) => node['Index Name'] === 'outbox_event_due_idx')
      .reduce((sum, n) => sum + (n['Shared Hit Blocks'] ?? 0) + (n['Shared Read Blocks'] ?? 0), 0);
  }

  // Every claim and settle leaves an entry at the front of the due index that only VACUUM
  // removes, and VACUUM cannot while an older snapshot is open. A claim from the head of the due
  // range (where the previous claim left it) skips them; a claim from the start walks them all.
  it('with 20,000 dead entries in front of 100 due rows, a claim from the head reads at most 3 buffers per row it returns', async () => {
    const horizon = await holdHorizon(() => t.db.connect());
    try {
      await t.sql.query(
        `INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload, next_attempt_at)
         SELECT gen_random_uuid(), 'bulk.done', 'bulk', g::text, '{}'::jsonb,
                now() - interval '1 hour' + g * interval '1 millisecond'
         FROM generate_series(1, $1::int) AS g`,
        [DEAD_ENTRIES],
      );
      const repo = new OutboxLeaseStore(t.db.dataSource);
      let head: number | null = null;
      for (let claimed = 0; claimed < DEAD_ENTRIES;) {
        const records = value(await repo.claim({ limit: 1000, leaseMs: LEASE_MS, dueFrom: head }));
        head = headAfter(records, 1000);
        value(
          await repo.markDelivered(
            records.map((r) => ({ id: r.id, attempts: r.attempts, handlers: ['h'] })),
          ),
        );
        claimed += records.length;
      }
      const due = await insertDue(t.sql);
      await t.sql.query('VACUUM ANALYZE outbox_event');

      const fromHead = await explainClaim(t.sql, DUE, null, head);
      expect(fromHead.claimed.sort()).toEqual([...due].sort());
      expect(dueIndexBuffers(fromHead.plan)).toBeLessThanOrEqual(3 * DUE);

      // The engine's live claim, through the function, with the plan the server keeps for it.
      const { plans, rows } = await nestedPlans(
        t.sql,
        CLAIM_LIVE_CALL,
        claimParameters({ limit: DUE, leaseMs: LEASE_MS, dueFrom: head }),
      );
      expect(rows.map((r) => r.id).sort()).toEqual([...due].sort());
      const inner = plans.filter((p) => p.queryText.includes('FOR UPDATE SKIP LOCKED'));
      expect(inner).toHaveLength(1);
      expect(dueIndexBuffers(inner[0].plan)).toBeLessThanOrEqual(3 * DUE);

      // What the bound saves: from the start of the index the same claim walks every entry (a
      // buffer per heap page of them, as consecutive entries of one page share a buffer visit).
      const fromStart = await explainClaim(t.sql, DUE, null, null);
      expect(fromStart.claimed.sort()).toEqual([...due].sort());
      expect(dueIndexBuffers(fromStart.plan)).toBeGreaterThan(3 * DUE);

      // The health probe's due side starts where the claims do, and counts the same 100 due
      // rows. (Its count of rows resting beyond now() still walks the entries the claims left
      // one lease ahead: bounded by the rate and the lease, not by how long the hold lasts.)
      const probe = async (from: number | null) => {
        const { rows } = await t.sql.query(
          `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${PENDING_STATE}`,
          pendingStateParameters({ dueFrom: from }, 1000),
        );
        const dueSide = planNodes(rows[0]['QUERY PLAN'][0].Plan as PlanNode).filter(
          (node) => !(node['Index Cond'] ?? '').includes('> now()'),
        );
        return dueSide.reduce((sum, node) => sum + dueIndexBuffers({ ...node, Plans: [] }), 0);
      };
      expect(await probe(head)).toBeLessThanOrEqual(3 * DUE);
      expect(await probe(null)).toBeGreaterThan(3 * DUE);
      expect(value(await repo.pendingState({ dueFrom: head }))).toMatchObject({ due: DUE });
    } finally {
      await horizon.release();
    }
  });
});

describe('pendingState and nextDue read indexes only', () => {
  const COUNT_LIMIT = 1000;

  beforeAll(async () => {
    await t.sql.query('TRUNCATE outbox_event');
    await insertResting(t.sql, 'backoff');
    await insertDue(t.sql);
    await t.sql.query('ANALYZE outbox_event');
  });

  const statements = {
    PENDING_STATE: { sql: PENDING_STATE, rest: [COUNT_LIMIT, null] },
    NEXT_DUE: { sql: NEXT_DUE, rest: [null] },
  };

  it.each([
    ['PENDING_STATE', null],
    ['PENDING_STATE', ['bulk.due', 'bulk.resting']],
    ['NEXT_DUE', null],
    ['NEXT_DUE', ['bulk.due', 'bulk.resting']],
  ] as const)(
    'with 200,000 rows in backoff, %s (types %j) scans only indexes and reads a bounded number of rows',
    async (name, types) => {
      const statement = statements[name];
      const { rows } = await t.sql.query(
        `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${statement.sql}`,
        [types, ...statement.rest],
      );
      const scans = tableScans(rows[0]['QUERY PLAN'][0].Plan);
      expect(scans.length).toBeGreaterThan(0);
      expect(scans.filter((scan) => !scan['Node Type'].startsWith('Index'))).toEqual([]);
      expect(new Set(scans.map((scan) => scan['Index Name']))).toEqual(
        new Set(
          name === 'NEXT_DUE'
            ? ['outbox_event_due_idx', 'outbox_event_dead_retry_idx']
            : [
                'outbox_event_due_idx',
                'outbox_event_dead_retry_idx',
                'outbox_event_leased_idx',
                // Blocked keys (no dead row here: the planner may take any dead index) and the
                // oldest retrying head of a key; see the describe below.
                'outbox_event_ordering_idx',
                'outbox_event_ordered_retry_idx',
              ],
        ),
      );
      // Each count stops at the cap and each probe at its first entry, whatever the backlog.
      const read = scans.reduce((sum, scan) => sum + rowsRead(scan), 0);
      expect(read).toBeLessThanOrEqual(2 * COUNT_LIMIT + 10);
    },
  );

  it('reports the capped counts and the timings', async () => {
    const repo = new OutboxLeaseStore(t.db.dataSource);
    const state = value(await repo.pendingState({ countLimit: COUNT_LIMIT }));
    expect(state).toMatchObject({
      due: DUE,
      retrying: COUNT_LIMIT,
      inFlight: 0,
      expiredLeases: 0,
      dead: 0,
      nextDueInMs: 0,
      countLimit: COUNT_LIMIT,
    });
    expect(state.oldestDueWaitMs).toEqual(expect.any(Number));
    expect(value(await repo.nextDue())).toBe(0);
    expect(value(await repo.exactState())).toMatchObject({
      due: DUE,
      retrying: BACKLOG,
      countLimit: null,
    });
  });
});

describe('OutboxDueIndex1765000000000 upgrades a 0.1 table in place', () => {
  let url: string;
  let name: string;
  let adminUrl: string;
  let sql: Client;

  beforeAll(async () => {
    adminUrl = requireRunEnv(ADMIN_URL_ENV);
    // The run's template name as prefix, so global teardown finds it if this file crashes.
    name = `${requireRunEnv(TEMPLATE_ENV)}_${randomBytes(4).toString('hex')}`;
    url = withDatabase(adminUrl, name);
    await withAdminClient(adminUrl, (client) =>
      client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`),
    );
    await migrate([CreateOutboxEvent1764400000000], (dataSource) =>
      dataSource.runMigrations({ transaction: 'each' }),
    );
    sql = new Client({ connectionString: url });
    await sql.connect();
  });

  afterAll(async () => {
    await sql?.end();
    if (name) await withAdminClient(adminUrl, (client) => dropDatabase(client, name));
  });

  /** The migrations up to this one: `undoLastMigration` must undo the due index. */
  const UP_TO_DUE_INDEX = OUTBOX_MIGRATIONS.slice(
    0,
    OUTBOX_MIGRATIONS.indexOf(OutboxDueIndex1765000000000) + 1,
  );

  async function migrate(
    migrations: (new () => MigrationInterface)[],
    work: (dataSource: DataSource) => Promise<unknown>,
  ): Promise<void> {
    const dataSource = new DataSource({ type: 'postgres', url, migrations, logging: false });
    await dataSource.initialize();
    try {
      await work(dataSource);
    } finally {
      await dataSource.destroy();
    }
  }

  it('keeps every row, moves leased and dead rows to their due time, and swaps the indexes; down() and up() again work', async () => {
    // One row of each kind as the 0.1 statements left them: the claim set only the lease, a
    // failure set the retry time, death set only dead_at.
    await sql.query(
      `INSERT INTO outbox_event
         (id, type, aggregate_type, aggregate_id, payload, occurred_at, attempts,
          lease_expires_at, next_attempt_at, dispatched_at, dead_at, deliveries, last_error)
       VALUES
         ('00000000-0000-7000-8000-000000000001', 'fresh', 'a', '1', '{"n": 1}',
          now() - interval '1 minute', 0, NULL, now() - interval '1 minute', NULL, NULL,
          '{}', NULL),
         ('00000000-0000-7000-8000-000000000002', 'retrying', 'a', '2', '{"n": 2}',
          now() - interval '1 hour', 2, NULL, now() + interval '5 minutes', NULL, NULL,
          '{"h1": "2026-01-01T00:00:00Z"}', 'boom'),
         ('00000000-0000-7000-8000-000000000003', 'leased', 'a', '3', '{"n": 3}',
          now() - interval '2 minutes', 1, now() + interval '1 minute',
          now() - interval '2 minutes', NULL, NULL, '{}', NULL),
         ('00000000-0000-7000-8000-000000000004', 'expired', 'a', '4', '{"n": 4}',
          now() - interval '3 minutes', 1, now() - interval '30 seconds',
          now() - interval '3 minutes', NULL, NULL, '{}', NULL),
         ('00000000-0000-7000-8000-000000000005', 'dead', 'a', '5', '{"n": 5}',
          now() - interval '1 day', 10, NULL, now() - interval '20 hours', NULL,
          now() - interval '2 hours', '{"h1": "2026-01-01T00:00:00Z"}', 'gone'),
         ('00000000-0000-7000-8000-000000000006', 'delivered', 'a', '6', '{"n": 6}',
          now() - interval '1 day', 1, NULL, now() - interval '1 day', now() - interval '1 hour',
          NULL, '{"h1": "2026-01-01T00:00:00Z"}', NULL)`,
    );
    const before = await rowsByType();
    const oldIndexes = await indexes();
    expect(Object.keys(oldIndexes)).toEqual([
      'outbox_event_dead_idx',
      'outbox_event_dispatched_idx',
      'outbox_event_pending_idx',
    ]);
    // What a table made from scratch by every migration has.
    const freshIndexes = await migratedIndexes(t.db.dataSource, 'outbox_event');

    await migrate(UP_TO_DUE_INDEX, (dataSource) =>
      dataSource.runMigrations({ transaction: 'each' }),
    );
    const after = await rowsByType();

    // Only next_attempt_at moves, and only for rows under a lease (expired or not) and dead rows.
    const withoutDueTime = (rows: typeof before) =>
      Object.values(rows).map((row) => ({ ...row, next_attempt_at: undefined }));
    expect(withoutDueTime(after)).toEqual(withoutDueTime(before));
    for (const type of ['fresh', 'retrying', 'delivered']) {
      expect(after[type].next_attempt_at).toEqual(before[type].next_attempt_at);
    }
    expect(after.leased.next_attempt_at).toEqual(before.leased.lease_expires_at);
    expect(after.expired.next_attempt_at).toEqual(before.expired.lease_expires_at);
    // Due 6 hours (the default deadRetryMs) after it died.
    expect(after.dead.next_attempt_at.getTime()).toBe(
      before.dead.dead_at.getTime() + 6 * 3_600_000,
    );
    // The indexes of this version (a later migration replaces the dead one).
    const dueIndexVersion = [
      'outbox_event_dead_due_idx',
      'outbox_event_dispatched_idx',
      'outbox_event_due_idx',
      'outbox_event_leased_idx',
    ];
    expect(Object.keys(await indexes()).sort()).toEqual(dueIndexVersion);

    // down() restores the 0.1 indexes, and up() runs again on top of it.
    await migrate(UP_TO_DUE_INDEX, (dataSource) => dataSource.undoLastMigration());
    expect(await indexes()).toEqual(oldIndexes);
    await migrate(UP_TO_DUE_INDEX, (dataSource) =>
      dataSource.runMigrations({ transaction: 'each' }),
    );
    expect(await rowsByType()).toEqual(after);
    expect(Object.keys(await indexes()).sort()).toEqual(dueIndexVersion);

    // The later migrations, which the claim's statement needs.
    await migrate(OUTBOX_MIGRATIONS, (dataSource) =>
      dataSource.runMigrations({ transaction: 'each' }),
    );
    expect(await indexes()).toEqual(freshIndexes);

    // The new claim takes the fresh row and the one whose lease ran out, in due order; not the
    // retrying row, the row still leased, the dead row (due in 4 hours) or the delivered one.
    const dataSource = new DataSource({ type: 'postgres', url, logging: false });
    await dataSource.initialize();
    try {
      const repo = new OutboxLeaseStore(dataSource);
      const claimed = value(await repo.claim({ limit: 10, leaseMs: LEASE_MS }));
      expect(claimed.map((r) => [r.type, r.attempts])).toEqual([
        ['fresh', 1],
        ['expired', 2],
      ]);
      expect(value(await repo.pendingState())).toMatchObject({
        due: 0,
        retrying: 1,
        inFlight: 3,
        expiredLeases: 0,
        dead: 1,
      });
    } finally {
      await dataSource.destroy();
    }
  });

  async function indexes() {
    const runner = {
      query: async <T>(text: string, parameters?: unknown[]) =>
        (await sql.query(text, parameters)).rows as T,
    };
    return migratedIndexes(runner, 'outbox_event');
  }

  /** Every row, by its type (one row per type here). */
  async function rowsByType(): Promise<Record<string, Record<string, any>>> {
    const { rows } = await sql.query('SELECT * FROM outbox_event ORDER BY id');
    return Object.fromEntries(rows.map((row) => [row.type, row]));
  }
});

describe('blocked keys and the oldest retrying head of a key read their own indexes', () => {
  beforeAll(async () => {
    await t.sql.query('TRUNCATE outbox_event');
    await insertResting(t.sql, 'backoff', 50_000);
    // Dead events of unordered handlers, and three keys whose head is dead for `ledger`.
    await t.sql.query(
      `INSERT INTO outbox_event
         (id, type, aggregate_type, aggregate_id, payload, attempts, dead_at, next_attempt_at,
          ordering_key, ordering_position, ordered_for)
       SELECT gen_random_uuid(), 'bulk.dead', 'bulk', g::text, '{}'::jsonb, 3, now(),
              now() + interval '1 hour',
              CASE WHEN g <= 3 THEN 'k' || g END, CASE WHEN g <= 3 THEN 1 END,
              CASE WHEN g <= 3 THEN '{ledger}'::text[] END
       FROM generate_series(1, 5000) AS g`,
    );
    // Two heads `ledger` retries, the older emitted ten minutes ago.
    await t.sql.query(
      `INSERT INTO outbox_event
         (id, type, aggregate_type, aggregate_id, payload, attempts, occurred_at, next_attempt_at,
          failures, ordering_key, ordering_position, ordered_for)
       SELECT gen_random_uuid(), 'bulk.ordered', 'bulk', g::text, '{}'::jsonb, 1,
              now() - g * interval '5 minutes', now() + interval '1 minute',
              '{"ledger": {"count": 1, "retryAt": null}}'::jsonb, 'r' || g, 1, '{ledger}'
       FROM generate_series(1, 2) AS g`,
    );
    await t.sql.query('ANALYZE outbox_event');
  });

  it('PENDING_STATE counts the blocked keys on outbox_event_blocked_idx and finds the oldest retrying head on outbox_event_ordered_retry_idx', async () => {
    const { rows } = await t.sql.query(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${PENDING_STATE}`,
      pendingStateParameters({}, 1000),
    );
    const scans = tableScans(rows[0]['QUERY PLAN'][0].Plan);
    const on = (index: string) => scans.filter((scan) => scan['Index Name'] === index);
    expect(on('outbox_event_blocked_idx').map(rowsRead)).toEqual([3]);
    expect(on('outbox_event_ordered_retry_idx').map(rowsRead)).toEqual([1]);

    const state = value(await new OutboxLeaseStore(t.db.dataSource).pendingState());
    expect(state).toMatchObject({ blockedKeys: 3, dead: 1000 });
    expect(state.orderedWaitMs).toBeGreaterThanOrEqual(10 * 60_000);
    expect(state.orderedWaitMs).toBeLessThan(11 * 60_000);
  });
});
