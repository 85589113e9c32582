import { OutboxLeaseStore, type NewOutboxEvent, type OutboxRecord } from '@app/outbox';
import { OutboxEmitStore } from '@app/outbox/store/emit/emit.store';
import {
  CLAIM_FAIR_CALL,
  CLAIM_LIVE,
  claimParameters,
  fairClaimParameters,
  toRecords,
} from '@app/outbox/store/lease/claim.sql';
import { headAfter } from '@app/outbox/engine/due-range';
import type { ClaimOptions } from '@app/outbox/store/lease/lease.types';
import { nestedPlans, rowsRead, tableScans, type NestedPlan } from './support/query-plans';
import { useTestDatabase } from './support/test-database';
import { holdHorizon } from './support/horizon';
import { value } from './support/result-value';

/**
 * `outbox_claim_fair_v1`: a claim shares its rows out across partitions, so a partition with one
 * due event is served within about one claim whatever another has due, at a cost that follows
 * the partitions with work, not the flood nor the partitions with nothing due.
 */

const LEASE_MS = 60_000;
const t = useTestDatabase();

beforeEach(async () => {
  await t.sql.query('TRUNCATE outbox_event');
});

/** `count` due first tries of `partition` (its organization), oldest `since` ago, 1 ms apart. */
async function insertDue(partition: string, count: number, since = '1 hour'): Promise<void> {
  await t.sql.query(
    `INSERT INTO outbox_event
       (id, type, aggregate_type, aggregate_id, organization_id, payload, next_attempt_at)
     SELECT gen_random_uuid(), 'bulk', 'bulk', $1 || '-' || g, $1, '{}',
            now() - $3::interval + g * interval '1 millisecond'
     FROM generate_series(1, $2::int) AS g`,
    [partition, count, since],
  );
}

/** One partition each of `count`, named `prefix-N`, whose only events are leased (in flight). */
async function insertLeasedPartitions(prefix: string, count: number): Promise<void> {
  await t.sql.query(
    `INSERT INTO outbox_event
       (id, type, aggregate_type, aggregate_id, organization_id, payload, attempts,
        next_attempt_at, lease_expires_at)
     SELECT gen_random_uuid(), 'bulk', 'bulk', g::text, $1 || '-' || g, '{}', 1,
            now() + interval '1 minute', now() + interval '1 minute'
     FROM generate_series(1, $2::int) AS g`,
    [prefix, count],
  );
}

function fair(limit: number): ClaimOptions {
  return { limit, leaseMs: LEASE_MS, includeDead: false, fair: true };
}

const partitions = (records: OutboxRecord[]) => new Set(records.map((r) => r.partition));

describe('fair claims', () => {
  it('serve a partition with one due event in the first claim while another has 10,000 due before it', async () => {
    await insertDue('org-A', 10_000, '1 hour');
    await insertDue('org-B', 1, '1 second');
    const store = new OutboxLeaseStore(t.db.dataSource);

    const first = value(await store.claim(fair(20)));
    expect(first).toHaveLength(20);
    expect(first.filter((r) => r.partition === 'org-B')).toHaveLength(1);
    // The rest of the claim is the flood's, oldest first.
    const flood = first.filter((r) => r.partition === 'org-A');
    expect(flood.map((r) => r.aggregateId)).toEqual(
      Array.from({ length: 19 }, (_, i) => `org-A-${i + 1}`),
    );

    // Without fair claims the same event waits behind the whole flood.
    await t.sql.query(`UPDATE outbox_event SET attempts = 0, lease_expires_at = NULL,
                         next_attempt_at = now() - interval '1 second'
                       WHERE organization_id = 'org-B'`);
    const unfair = value(await store.claim({ ...fair(20), fair: false }));
    expect(unfair.filter((r) => r.partition === 'org-B')).toEqual([]);
  });

  it('serve each of 60 small partitions within 4 claims of 20 while a flood has 10,000 due, taking turns across claims', async () => {
    await insertDue('org-A', 10_000, '1 hour');
    for (let p = 0; p < 60; p++)
      await insertDue(`quiet-${String(p).padStart(2, '0')}`, 3, '1 second');
    const store = new OutboxLeaseStore(t.db.dataSource);
    const served = new Set<string>();
    const claims: number[] = [];
    for (let claim = 1; claim <= 4; claim++) {
      const records = value(await store.claim(fair(20)));
      expect(records).toHaveLength(20);
      for (const partition of partitions(records)) {
        if (partition.startsWith('quiet-')) served.add(partition);
      }
      claims.push(served.size);
    }
    expect(served.size).toBe(60);
    // Every claim served new partitions: the next starts where the last one's visit stopped.
    expect(claims[0]).toBeGreaterThan(0);
    for (let i = 1; i < claims.length - 1; i++) expect(claims[i]).toBeGreaterThan(claims[i - 1]);
  });

  it('partition by the key an emitter names, else by organization, else one partition for the rest', async () => {
    const emitStore = new OutboxEmitStore(t.db.dataSource);
    const event = (aggregateId: string, extra: Partial<NewOutboxEvent>): NewOutboxEvent => ({
      type: 'bulk',
      aggregateType: 'bulk',
      aggregateId,
      payload: {},
      ...extra,
    });
    await t.db.dataSource.transaction((manager) =>
      emitStore.enqueue(manager, [
        event('named', { organizationId: 'org-A', partitionKey: 'region-eu' }),
        event('org', { organizationId: 'org-A' }),
        event('none', {}),
      ]),
    );
    // A chunk that names no partition leaves the column out of its INSERT.
    await t.db.dataSource.transaction((manager) =>
      emitStore.enqueue(manager, event('later', { organizationId: 'org-B' })),
    );
    const { rows } = await t.sql.query<{ aggregate_id: string; partition_key: string | null }>(
      `SELECT aggregate_id, partition_key FROM outbox_event ORDER BY aggregate_id`,
    );
    expect(rows).toEqual([
      { aggregate_id: 'later', partition_key: null },
      { aggregate_id: 'named', partition_key: 'region-eu' },
      { aggregate_id: 'none', partition_key: null },
      { aggregate_id: 'org', partition_key: null },
    ]);
    const claimed = value(await new OutboxLeaseStore(t.db.dataSource).claim(fair(10)));
    expect(Object.fromEntries(claimed.map((r) => [r.aggregateId, r.partition]))).toEqual({
      named: 'region-eu',
      org: 'org-A',
      none: '',
      later: 'org-B',
    });
  });

  it('claims every due live row a due-order claim claims, with the same content, and nothing else', async () => {
    await insertDue('org-A', 30, '1 hour');
    await insertDue('org-B', 5, '1 minute');
    await t.sql.query(
      `INSERT INTO outbox_event
         (id, type, aggregate_type, aggregate_id, payload, attempts, next_attempt_at,
          lease_expires_at, dead_at, dispatched_at, failures)
       VALUES
         (gen_random_uuid(), 'a', 'agg', 'no-org', '{}', 0, now() - interval '1 minute',
          NULL, NULL, NULL, '{}'),
         (gen_random_uuid(), 'a', 'agg', 'retry', '{}', 2, now() - interval '2 hours',
          NULL, NULL, NULL, '{"h": {"count": 1, "retryAt": "2026-01-01T00:00:00Z"}}'),
         (gen_random_uuid(), 'a', 'agg', 'backoff', '{}', 1, now() + interval '1 hour',
          NULL, NULL, NULL, '{}'),
         (gen_random_uuid(), 'a', 'agg', 'leased', '{}', 1, now() + interval '1 minute',
          now() + interval '1 minute', NULL, NULL, '{}'),
         (gen_random_uuid(), 'a', 'agg', 'dead', '{}', 3, now() - interval '2 hours',
          NULL, now() - interval '3 hours', NULL, '{}'),
         (gen_random_uuid(), 'a', 'agg', 'delivered', '{}', 1, now() - interval '2 hours',
          NULL, NULL, now() - interval '2 hours', '{}')`,
    );
    const options = fair(100);
    const byId = (records: OutboxRecord[]) =>
      records
        .map(({ claimedAt, leaseExpiresAt, fromFill, ...record }) => ({
          ...record,
          leaseMs: leaseExpiresAt.getTime() - claimedAt.getTime(),
        }))
        .sort((a, b) => a.id.localeCompare(b.id));
    const inRollback = async (statement: string, parameters: unknown[]) => {
      await t.sql.query('BEGIN');
      try {
        const { rows } = await t.sql.query(statement, parameters);
        return toRecords(rows as Parameters<typeof toRecords>[0]);
      } finally {
        await t.sql.query('ROLLBACK');
      }
    };
    const dueOrder = await inRollback(CLAIM_LIVE, claimParameters(options));
    const shared = await inRollback(CLAIM_FAIR_CALL, fairClaimParameters(options, ''));
    expect(dueOrder).toHaveLength(37);
    expect(byId(shared)).toEqual(byId(dueOrder));
    expect(shared.find((r) => r.aggregateId === 'no-org')?.partition).toBe('');
    // The retry has no share (it is not a first try): the fill took it.
    expect(shared.find((r) => r.aggregateId === 'retry')?.fromFill).toBe(true);
  });

  it('take what a due-order claim takes, in its order, while only one partition has due first tries', async () => {
    await insertDue('org-A', 40, '1 hour');
    // A retry of another partition has no share: it does not make the claim share out.
    await t.sql.query(
      `INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, organization_id, payload,
                                 attempts, next_attempt_at, failures)
       VALUES (gen_random_uuid(), 'bulk', 'bulk', 'retry', 'org-B', '{}', 1,
               now() - interval '30 minutes', '{"h": {"count": 1, "retryAt": null}}')`,
    );
    const inRollback = async (statement: string, parameters: unknown[]) => {
      await t.sql.query('BEGIN');
      try {
        return toRecords((await t.sql.query(statement, parameters)).rows as never);
      } finally {
        await t.sql.query('ROLLBACK');
      }
    };
    const options = fair(25);
    const dueOrder = await inRollback(CLAIM_LIVE, claimParameters(options));
    const shared = await inRollback(CLAIM_FAIR_CALL, fairClaimParameters(options, 'org-A'));
    expect(shared.map((r) => r.id)).toEqual(dueOrder.map((r) => r.id));
    expect(shared.every((r) => r.fromFill)).toBe(true);
    // The visit stays where it was.
    const { rows } = await t.sql.query<{ visited: string }>(
      `SELECT visited FROM (${CLAIM_FAIR_CALL}) AS c LIMIT 1`,
      fairClaimParameters(options, 'org-A'),
    );
    expect(rows[0].visited).toBe('org-A');
  });

  it('move the head of the due range to the last row of the fill, and to nowhere when the shares took the whole claim', () => {
    const record = (dueAt: number, fromFill: boolean) =>
      ({
        dueAt: new Date(dueAt),
        claimedAt: new Date(9_999),
        deadAt: null,
        fromFill,
      }) as OutboxRecord;
    expect(headAfter([record(50, false), record(10, true), record(20, true)], 3)).toBe(20);
    expect(headAfter([record(50, false), record(10, false)], 2)).toBeNull();
    // Short: every due row it could see was taken.
    expect(headAfter([record(50, false)], 2)).toBe(9_999);
  });

  describe('cost', () => {
    /** The statements inside the function, as the server ran them. */
    function rowsReadIn(plans: NestedPlan[]): number {
      const inner = plans.filter((p) => p.queryText.includes('WITH RECURSIVE ahead'));
      expect(inner).toHaveLength(1);
      const scans = tableScans(inner[0].plan);
      expect(scans.map((node) => node['Node Type'])).not.toContain('Seq Scan');
      expect(scans.map((node) => node['Index Name'])).toContain('outbox_event_fair_idx');
      return scans.reduce((sum, node) => sum + rowsRead(node), 0);
    }

    it('reads about one index probe per partition with work and the rows it takes: not the flood, not the partitions with nothing due', async () => {
      const LIMIT = 50;
      await insertDue('org-A', 20_000, '1 hour');
      for (const p of 'BCDEFGHIJK') await insertDue(`org-${p}`, 1, '1 second');
      await t.sql.query('ANALYZE outbox_event');
      const parameters = fairClaimParameters(fair(LIMIT), '');
      const calm = await nestedPlans(t.sql, CLAIM_FAIR_CALL, parameters);
      expect(calm.rows).toHaveLength(LIMIT);
      const readCalm = rowsReadIn(calm.plans);

      // 5,000 partitions whose events are all in flight, and the flood ten times bigger.
      await insertLeasedPartitions('busy', 5_000);
      await insertDue('org-A', 180_000, '2 hours');
      await t.sql.query('ANALYZE outbox_event');
      const crowded = await nestedPlans(t.sql, CLAIM_FAIR_CALL, parameters);
      expect(crowded.rows).toHaveLength(LIMIT);
      const readCrowded = rowsReadIn(crowded.plans);

      // 11 partitions with work: a probe each to find them, one to end the scan, one to find
      // each share's first row, and the rows the claim takes.
      expect(readCalm).toBeLessThanOrEqual(4 * 11 + 2 * LIMIT);
      expect(readCrowded).toBeLessThanOrEqual(readCalm + 2);
    });

    it('skips, from the lower bound of the due range, the entries claimed events left while a long transaction holds the horizon', async () => {
      const EVENTS = 5_000;
      const horizon = await holdHorizon(() => t.db.connect());
      try {
        await insertDue('org-A', EVENTS, '1 hour');
        const store = new OutboxLeaseStore(t.db.dataSource);
        for (let claimed = 0; claimed < EVENTS; claimed += 250) {
          expect(value(await store.claim(fair(250)))).toHaveLength(250);
        }
        // One new event of the same partition, and one of another: the bound is the claim's own
        // clock after the burn-down, as the engine keeps it (`DueRange`).
        const { rows } = await t.sql.query<{ now: Date }>('SELECT now() AS now');
        await insertDue('org-A', 1, '0 seconds');
        await insertDue('org-B', 1, '0 seconds');
        const fairIndexBuffers = async (dueFrom: number | null) => {
          const { plans } = await nestedPlans(
            t.sql,
            CLAIM_FAIR_CALL,
            fairClaimParameters({ ...fair(10), dueFrom }, ''),
          );
          return plans
            .flatMap((p) => tableScans(p.plan))
            .filter((node) => node['Index Name'] === 'outbox_event_fair_idx')
            .reduce((sum, node) => sum + (node['Shared Hit Blocks'] ?? 0), 0);
        };
        const fromBound = await fairIndexBuffers(rows[0].now.getTime() - 1000);
        const fromStart = await fairIndexBuffers(null);
        // From the start, each probe of org-A reads the rows of the 5,000 entries left behind
        // (about 360 buffers); from the bound, their index entries only (15 to 40, by server).
        expect(fromStart).toBeGreaterThan(4 * fromBound);
        expect(fromBound).toBeLessThan(120);
      } finally {
        await horizon.release();
      }
    });

    it.each(['force_generic_plan', 'force_custom_plan'])(
      'reads by its index under %s from statistics taken before the flood, when the table held only delivered events',
      async (mode) => {
        const LIMIT = 13;
        await t.sql.query(
          `INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, organization_id,
                                     payload, next_attempt_at, dispatched_at)
           SELECT gen_random_uuid(), 'bulk', 'bulk', g::text, 'org-' || chr(66 + g % 10), '{}',
                  now() - interval '1 hour', now() - interval '1 hour'
           FROM generate_series(1, 500) AS g`,
        );
        await t.sql.query('ANALYZE outbox_event');
        await t.sql.query('ALTER TABLE outbox_event SET (autovacuum_enabled = false)');
        // A connection of its own: the function's plans are made on it, from these statistics.
        const session = await t.db.connect();
        try {
          await insertDue('org-A', 20_000, '1 hour');
          for (const p of 'BCDEFGHIJK') await insertDue(`org-${p}`, 1, '1 second');
          await session.query(`SET plan_cache_mode = ${mode}`);
          const parameters = fairClaimParameters(fair(LIMIT), '');
          const { plans, rows } = await nestedPlans(session, CLAIM_FAIR_CALL, parameters);
          expect(rows).toHaveLength(LIMIT);
          expect(rowsReadIn(plans)).toBeLessThanOrEqual(4 * 11 + 2 * LIMIT);
        } finally {
          await t.sql.query('ALTER TABLE outbox_event RESET (autovacuum_enabled)');
        }
      },
    );
  });
});
