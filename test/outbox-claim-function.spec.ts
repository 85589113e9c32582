import { OutboxOrdering1773000000000, OutboxLeaseStore, type OutboxRecord } from '@app/outbox';
import {
  CLAIM_FUNCTIONS_PRESENT,
  CLAIM_LIVE,
  CLAIM_LIVE_CALL,
  claimParameters,
  toRecords,
} from '@app/outbox/store/lease/claim.sql';
import type { ClaimOptions } from '@app/outbox/store/lease/lease.types';
import {
  nestedPlans,
  rowsRead,
  tableScans,
  type NestedPlan,
  type PlanNode,
} from './support/query-plans';
import { Client } from 'pg';
import { useTestDatabase } from './support/test-database';
import { value } from './support/result-value';

/**
 * `outbox_claim_live_v1` is `CLAIM_LIVE` with plans the server keeps: it must claim exactly what
 * the statement claims, read the due index whatever plan the server keeps for it, and the
 * repository must claim without it while it is absent.
 */

const LEASE_MS = 60_000;

const t = useTestDatabase();

beforeEach(async () => {
  await t.sql.query('TRUNCATE outbox_event');
});

/**
 * Rows in every state a claim must tell apart, their times relative to the SQL clock: due live
 * rows of two types a second apart (one with a delivered and a failed handler), rows in backoff,
 * under a lease, dead and due for replay, delivered, discarded. Returns the due times of the
 * due live rows, in due order, as epoch ms.
 */
async function insertEveryState(): Promise<number[]> {
  await t.sql.query(`
    INSERT INTO outbox_event
      (id, type, aggregate_type, aggregate_id, payload, attempts, next_attempt_at,
       lease_expires_at, dispatched_at, dead_at, discarded_at, deliveries, failures, ordering_key)
    SELECT gen_random_uuid(), CASE WHEN g % 3 = 0 THEN 'b' ELSE 'a' END, 'agg', g::text,
           jsonb_build_object('n', g), CASE WHEN g = 4 THEN 2 ELSE 0 END,
           now() - interval '1 hour' + g * interval '1 second', NULL, NULL, NULL, NULL,
           CASE WHEN g = 4 THEN '{"done": "2026-01-01T00:00:00Z"}'::jsonb ELSE '{}' END,
           CASE WHEN g = 4 THEN '{"flaky": {"count": 1, "retryAt": "2026-01-01T00:00:00Z"}}'::jsonb
                ELSE '{}' END,
           CASE WHEN g % 2 = 0 THEN 'key:' || g END
    FROM generate_series(1, 10) AS g;
    INSERT INTO outbox_event
      (id, type, aggregate_type, aggregate_id, payload, attempts, next_attempt_at,
       lease_expires_at, dispatched_at, dead_at, discarded_at)
    VALUES
      (gen_random_uuid(), 'a', 'agg', 'backoff', '{}', 1, now() + interval '1 hour',
       NULL, NULL, NULL, NULL),
      (gen_random_uuid(), 'a', 'agg', 'leased', '{}', 1, now() + interval '1 minute',
       now() + interval '1 minute', NULL, NULL, NULL),
      (gen_random_uuid(), 'a', 'agg', 'dead', '{}', 3, now() - interval '2 hours',
       NULL, NULL, now() - interval '3 hours', NULL),
      (gen_random_uuid(), 'a', 'agg', 'delivered', '{}', 1, now() - interval '2 hours',
       NULL, now() - interval '2 hours', NULL, NULL),
      (gen_random_uuid(), 'a', 'agg', 'discarded', '{}', 3, now() - interval '2 hours',
       NULL, NULL, now() - interval '3 hours', now() - interval '2 hours');
  `);
  const { rows } = await t.sql.query<{ ms: number }>(
    `SELECT (extract(epoch FROM next_attempt_at) * 1000)::float8 AS ms FROM outbox_event
     WHERE aggregate_id ~ '^[0-9]+$' ORDER BY next_attempt_at, id`,
  );
  return rows.map((row) => row.ms);
}

/** One claim statement in a transaction rolled back, its rows mapped as the repository maps them. */
async function claimWith(statement: string, options: ClaimOptions): Promise<OutboxRecord[]> {
  await t.sql.query('BEGIN');
  try {
    const { rows } = await t.sql.query(statement, claimParameters(options));
    return toRecords(rows as Parameters<typeof toRecords>[0]);
  } finally {
    await t.sql.query('ROLLBACK');
  }
}

/** A record without the claim's own clock, which differs between two transactions. */
function comparable({ claimedAt, leaseExpiresAt, ...record }: OutboxRecord) {
  return { ...record, leaseMs: leaseExpiresAt.getTime() - claimedAt.getTime() };
}

/** `count` due live rows of type 'bulk', 10 ms apart from `since` ago. */
async function insertDue(count: number, since: string): Promise<void> {
  await t.sql.query(
    `INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload, next_attempt_at)
     SELECT gen_random_uuid(), 'bulk', 'bulk', g::text, '{}',
            now() - $2::interval + g * interval '10 milliseconds'
     FROM generate_series(1, $1::int) AS g`,
    [count, since],
  );
}

describe('outbox_claim_live_v2', () => {
  it('claims exactly what CLAIM_LIVE claims, in the same order and shape', async () => {
    const due = await insertEveryState();
    const cases: ClaimOptions[] = [
      { limit: 100, leaseMs: LEASE_MS },
      { limit: 3, leaseMs: LEASE_MS },
      { limit: 100, leaseMs: LEASE_MS, types: ['b'] },
      { limit: 100, leaseMs: 1500, dueFrom: due[4] },
      { limit: 2, leaseMs: LEASE_MS, types: ['a', 'b'], dueFrom: due[2] },
      { limit: 100, leaseMs: LEASE_MS, dueFrom: due[9] + 1 },
    ];
    for (const options of cases) {
      const statement = (await claimWith(CLAIM_LIVE, options)).map(comparable);
      const call = (await claimWith(CLAIM_LIVE_CALL, options)).map(comparable);
      expect({ options, records: call }).toEqual({ options, records: statement });
    }
    // What the cases above compare is not empty: the statement takes the due live rows alone.
    const all = await claimWith(CLAIM_LIVE_CALL, cases[0]);
    expect(all.map((r) => r.dueAt.getTime())).toEqual(due.map(Math.floor));
    expect(all.map((r) => r.leaseExpiresAt.getTime() - r.claimedAt.getTime())).toEqual(
      due.map(() => LEASE_MS),
    );
    expect(all.find((r) => r.attempts === 3)).toMatchObject({
      orderingKey: 'key:4',
      deliveries: { done: '2026-01-01T00:00:00Z' },
      failures: { flaky: { count: 1, retryAt: '2026-01-01T00:00:00Z' } },
    });
  });

  describe('reads the due index whatever plan the server keeps for it', () => {
    const RESTING = 50_000;
    const DUE = 100;

    /** The claim inside the function, as the server ran it. */
    function innerClaim(plans: NestedPlan[]): PlanNode {
      const inner = plans.filter((p) => p.queryText.includes('FOR UPDATE SKIP LOCKED'));
      expect(inner).toHaveLength(1);
      return inner[0].plan;
    }

    it.each(['force_generic_plan', 'force_custom_plan'])(
      'with 50,000 rows in backoff and 100 due, under %s, a claim of 100 reads at most 200 rows',
      async (mode) => {
        await t.sql.query(
          `INSERT INTO outbox_event
             (id, type, aggregate_type, aggregate_id, payload, attempts, next_attempt_at)
           SELECT gen_random_uuid(), 'bulk', 'bulk', g::text, '{}', 1,
                  now() + interval '1 minute' + g * interval '10 milliseconds'
           FROM generate_series(1, $1::int) AS g`,
          [RESTING],
        );
        await insertDue(DUE, '1 minute');
        await t.sql.query('ANALYZE outbox_event');
        await t.sql.query(`SET plan_cache_mode = ${mode}`);
        try {
          const from = Date.now() - 10 * 60_000;
          for (const options of [
            { limit: DUE, leaseMs: LEASE_MS },
            { limit: DUE, leaseMs: LEASE_MS, types: ['bulk'], dueFrom: from },
          ]) {
            const { plans, rows } = await nestedPlans(
              t.sql,
              CLAIM_LIVE_CALL,
              claimParameters(options),
            );
            expect(rows).toHaveLength(DUE);
            const scans = tableScans(innerClaim(plans));
            expect(scans.map((node) => node['Node Type'])).not.toContain('Seq Scan');
            expect(scans.map((node) => node['Index Name'])).toContain('outbox_event_due_idx');
            expect(scans.reduce((sum, node) => sum + rowsRead(node), 0)).toBeLessThanOrEqual(
              2 * DUE,
            );
          }
        } finally {
          await t.sql.query('RESET plan_cache_mode');
        }
      },
    );
  });
  it('keeps reading by index when its plans were made on an empty, never-analyzed table that then grows to 100,000 rows', async () => {
    const GROWN = 100_000;
    const LIMIT = 100;
    // Nothing may analyze the table meanwhile: that would replan and hide a plan kept from before.
    await t.sql.query('ALTER TABLE outbox_event SET (autovacuum_enabled = false)');
    const session = new Client({ connectionString: t.db.directUrl });
    await session.connect();
    try {
      // A connection's first claims on an empty table: the plans it keeps are made now.
      for (let i = 0; i < 10; i++) {
        const { rows } = await session.query(
          CLAIM_LIVE_CALL,
          claimParameters({ limit: LIMIT, leaseMs: LEASE_MS }),
        );
        expect(rows).toHaveLength(0);
      }
      await insertDue(GROWN, '1 hour');
      const { plans, rows } = await nestedPlans(
        session,
        CLAIM_LIVE_CALL,
        claimParameters({ limit: LIMIT, leaseMs: LEASE_MS }),
      );
      expect(rows).toHaveLength(LIMIT);
      const scans = plans.flatMap((p) => tableScans(p.plan));
      expect(scans.length).toBeGreaterThan(0);
      expect(scans.filter((node) => node['Node Type'] === 'Seq Scan')).toEqual([]);
      expect(scans.reduce((sum, node) => sum + rowsRead(node), 0)).toBeLessThanOrEqual(3 * LIMIT);
    } finally {
      await session.end();
      await t.sql.query('ALTER TABLE outbox_event RESET (autovacuum_enabled)');
    }
  });
});

describe('OutboxLeaseStore and the claim function', () => {
  // The function of this version is created by the ordering migration; 'down' drops it alone
  // (the migration's own down() would drop the ordering columns too).
  async function migrate(direction: 'up' | 'down') {
    if (direction === 'down') {
      await t.sql.query(
        `DROP FUNCTION outbox_claim_live_v2(integer, double precision, text[], timestamptz, text[])`,
      );
      return;
    }
    const runner = t.db.dataSource.createQueryRunner();
    try {
      await new OutboxOrdering1773000000000().up(runner);
    } finally {
      await runner.release();
    }
  }

  async function present(): Promise<boolean> {
    const { rows } = await t.sql.query<{ chained: boolean }>(CLAIM_FUNCTIONS_PRESENT);
    return rows[0].chained;
  }

  afterEach(async () => {
    await migrate('up');
  });

  it('claims through the statement while the function is absent, and through the function once found', async () => {
    await t.sql.query(
      `INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload)
       SELECT gen_random_uuid(), 'a', 'agg', g::text, '{}' FROM generate_series(1, 4) AS g`,
    );
    const live = { limit: 1, leaseMs: LEASE_MS, includeDead: false };

    // Found at the first claim and called from then on: dropped, the call fails once...
    const repo = new OutboxLeaseStore(t.db.dataSource);
    expect(value(await repo.claim(live))).toHaveLength(1);
    await migrate('down');
    expect(await present()).toBe(false);
    const failed = await repo.claim(live);
    expect(failed.ok ? 'claimed' : failed.error.code).toBe('42883');

    // ...and the next claim looks again and sends the statement itself.
    expect(value(await repo.claim(live))).toHaveLength(1);

    // A repository that starts without the function claims without it from the first claim.
    const fresh = new OutboxLeaseStore(t.db.dataSource);
    expect(value(await fresh.claim(live))).toHaveLength(1);

    // The migration again, and down() and up() once more, leave it as it was.
    await migrate('up');
    expect(await present()).toBe(true);
    await migrate('down');
    await migrate('up');
    const again = new OutboxLeaseStore(t.db.dataSource);
    expect(value(await again.claim(live))).toHaveLength(1);
    expect(value(await again.claim(live))).toEqual([]);
  });
});
