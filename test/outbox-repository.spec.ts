import type { ModuleRef } from '@nestjs/core';
import { DataSource, type EntityManager } from 'typeorm';
import {
  InvalidOutboxEventError,
  OutboxAdmin,
  OutboxPayloadNotSerializableError,
  OutboxPublisher,
  OutboxLeaseStore,
  OutboxStoreError,
  OutboxTransactionRequiredError,
  resolveOutboxOptions,
  type NewOutboxEvent,
} from '@app/outbox';
import { AdminStore } from '@app/outbox/store/admin/admin.store';
import { OutboxEmitStore } from '@app/outbox/store/emit/emit.store';
import { useOutboxStores } from './support/outbox-stores';

/** What enqueue refuses, and how database failures reach callers. */

const t = useOutboxStores();

const good: NewOutboxEvent = {
  type: 'invoice.paid',
  aggregateType: 'invoice',
  aggregateId: 'inv-1',
  payload: { amount: 100 },
};

async function count(): Promise<number> {
  const { rows } = await t.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox_event');
  return rows[0].n;
}

describe('OutboxEmitStore.enqueue', () => {
  it('refuses the default manager, which runs outside any transaction', async () => {
    await expect(t.emitStore.enqueue(t.db.dataSource.manager, good)).rejects.toThrow(
      OutboxTransactionRequiredError,
    );
    expect(await count()).toBe(0);
  });

  it('refuses a query runner that has not started a transaction', async () => {
    const runner = t.db.dataSource.createQueryRunner();
    try {
      await expect(t.emitStore.enqueue(runner.manager, good)).rejects.toThrow(
        /must run inside a transaction/,
      );
    } finally {
      await runner.release();
    }
    expect(await count()).toBe(0);
  });

  it.each([
    [{ total: 10n }, '$.payload.total', 'a BigInt'],
    [{ notify: () => undefined }, '$.payload.notify', 'a function'],
  ])(
    'refuses an unserialisable payload, naming the event type and the path',
    async (payload, path, reason) => {
      const error = await t.db.dataSource
        .transaction((manager) =>
          t.emitStore.enqueue(manager, [good, { ...good, type: 'invoice.voided', payload }]),
        )
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OutboxPayloadNotSerializableError);
      expect(error).toMatchObject({
        eventType: 'invoice.voided',
        path: path.replace('$.payload', 'payload'),
      });
      expect((error as Error).message).toBe(
        `Outbox event "invoice.voided" is not JSON-serialisable: ${path.replace('$.payload', 'payload')} is ${reason}`,
      );
      expect(await count()).toBe(0);
    },
  );

  it('refuses a cyclic payload before anything is written', async () => {
    const payload: Record<string, unknown> = { id: 1 };
    payload.parent = payload;
    await expect(
      t.db.dataSource.transaction((manager) => t.emitStore.enqueue(manager, { ...good, payload })),
    ).rejects.toThrow(
      'Outbox event "invoice.paid" is not JSON-serialisable: payload.parent is a circular reference',
    );
    expect(await count()).toBe(0);
  });

  it.each([
    [{ type: '' }, 'type', 'Invalid outbox event: type must be a non-empty string, got ""'],
    [
      { aggregateId: 42 },
      'aggregateId',
      'Invalid outbox event: aggregateId must be a non-empty string, got 42',
    ],
    [{ id: 'not-a-uuid' }, 'id', 'Invalid outbox event: id must be a UUID, got "not-a-uuid"'],
    [
      { causationId: 'evt-1' },
      'causationId',
      'Invalid outbox event: causationId must be a UUID, got "evt-1"',
    ],
    [
      { correlationId: '' },
      'correlationId',
      'Invalid outbox event: correlationId must be a non-empty string, got ""',
    ],
    [
      { orderingKey: '  ' },
      'orderingKey',
      'Invalid outbox event: orderingKey must be a non-empty string, got "  "',
    ],
    [
      { orderingKey: 42 },
      'orderingKey',
      'Invalid outbox event: orderingKey must be a non-empty string, got 42',
    ],
    [
      { orderingKey: 'k'.repeat(257) },
      'orderingKey',
      `Invalid outbox event: orderingKey must be a string of at most 256 characters (got 257), got "${'k'.repeat(64)}…"`,
    ],
    [
      { partitionKey: '' },
      'partitionKey',
      'Invalid outbox event: partitionKey must be a non-empty string, got ""',
    ],
    [
      { partitionKey: 'p'.repeat(257) },
      'partitionKey',
      `Invalid outbox event: partitionKey must be a string of at most 256 characters (got 257), got "${'p'.repeat(64)}…"`,
    ],
    [
      { metadata: [1] },
      'metadata',
      'Invalid outbox event: metadata must be a JSON object, got [1]',
    ],
  ])('refuses a malformed event field %j', async (override, field, message) => {
    const error = await t.db.dataSource
      .transaction((manager) =>
        t.emitStore.enqueue(manager, { ...good, ...override } as NewOutboxEvent),
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOutboxEventError);
    expect(error).toMatchObject({ field, message });
    expect(await count()).toBe(0);
  });

  it('writes every field of a valid batch and returns time-ordered ids in input order', async () => {
    const ids = await t.db.dataSource.transaction(async (manager) => {
      const result = await t.emitStore.enqueue(manager, [
        {
          ...good,
          organizationId: 'org-1',
          requestId: 'req-1',
          metadata: { traceparent: '00-ab' },
          causationId: '0190A000-0000-7000-8000-00000000000A',
          correlationId: 'corr-1',
          orderingKey: 'k'.repeat(256),
        },
        {
          ...good,
          aggregateId: 'inv-2',
          payload: [1, 'two', null],
          occurredAt: undefined,
        } as NewOutboxEvent,
      ]);
      if (!result.ok) throw result.error;
      return result.value.map((e) => e.id);
    });
    expect(ids).toHaveLength(2);
    expect(ids[0] < ids[1]).toBe(true);
    expect(ids[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/);
    const { rows } = await t.sql.query(
      `SELECT id, type, aggregate_type, aggregate_id, organization_id, request_id, payload, metadata,
              causation_id, correlation_id, ordering_key,
              attempts, deliveries, dispatched_at, dead_at, occurred_at = next_attempt_at AS due_now
       FROM outbox_event ORDER BY id`,
    );
    expect(rows).toEqual([
      {
        id: ids[0],
        type: 'invoice.paid',
        aggregate_type: 'invoice',
        aggregate_id: 'inv-1',
        organization_id: 'org-1',
        request_id: 'req-1',
        payload: { amount: 100 },
        metadata: { traceparent: '00-ab' },
        causation_id: '0190a000-0000-7000-8000-00000000000a',
        correlation_id: 'corr-1',
        ordering_key: 'k'.repeat(256),
        attempts: 0,
        deliveries: {},
        dispatched_at: null,
        dead_at: null,
        due_now: true,
      },
      expect.objectContaining({
        id: ids[1],
        payload: [1, 'two', null],
        metadata: {},
        organization_id: null,
        causation_id: null,
        correlation_id: null,
        ordering_key: null,
      }),
    ]);
  });
});

/**
 * What PostgreSQL would refuse (NUL, lone surrogates, stack-deep jsonb) or JSON would change
 * (Map, Set) is refused with a typed error before any statement runs: the caller's transaction
 * stays usable, and what it commits holds none of the refused batch.
 */
describe('OutboxEmitStore.enqueue refuses what the store cannot hold as given', () => {
  let publisher: OutboxPublisher;
  beforeAll(() => {
    // onModuleInit is not called: emit is given its manager, so the ModuleRef is never used.
    publisher = new OutboxPublisher(
      t.emitStore,
      undefined as unknown as ModuleRef,
      resolveOutboxOptions({}),
      t.db.dataSource,
    );
  });

  /** Runs `attempt` in a transaction that then enqueues `good` and commits; returns what it threw. */
  async function refusedThenCommitted(
    attempt: (manager: EntityManager) => Promise<unknown>,
  ): Promise<unknown> {
    const error = await t.db.dataSource.transaction(async (manager) => {
      const thrown = await attempt(manager).then(
        () => undefined,
        (e: unknown) => e,
      );
      const result = await t.emitStore.enqueue(manager, good);
      if (!result.ok) throw result.error;
      return thrown;
    });
    const { rows } = await t.sql.query<{ type: string }>('SELECT type FROM outbox_event');
    expect(rows).toEqual([{ type: 'invoice.paid' }]);
    return error;
  }

  const NUL = 'a string containing NUL (\\u0000)';
  const SURROGATE = 'a string containing a lone UTF-16 surrogate';

  it.each([
    [
      'NUL in a nested string',
      { payload: { items: [{ name: 'a' }, { name: 'b' }, { name: 'c' }, { name: 'd\u0000' }] } },
      'payload.items[3].name',
      NUL,
    ],
    ['a lone high surrogate', { payload: { note: 'x\ud800' } }, 'payload.note', SURROGATE],
    ['a lone low surrogate', { payload: ['\udc00'] }, 'payload[0]', SURROGATE],
    [
      'NUL in a key',
      { payload: { 'a\u0000b': 1 } },
      'payload["a\\u0000b"]',
      'a key containing NUL (\\u0000)',
    ],
    [
      'a lone surrogate in a key',
      { payload: { nested: { '\ud800': 1 } } },
      'payload.nested["\\ud800"]',
      'a key containing a lone UTF-16 surrogate',
    ],
    [
      'a Map',
      { payload: { tags: new Map([['a', 1]]) } },
      'payload.tags',
      'a Map, which JSON cannot represent',
    ],
    [
      'a Set',
      { payload: { ids: new Set([1]) } },
      'payload.ids',
      'a Set, which JSON cannot represent',
    ],
    ['NUL in metadata', { metadata: { trace: '00\u0000' } }, 'metadata.trace', NUL],
  ])('refuses %s, naming the event type and the path', async (_, override, path, reason) => {
    const bad = { ...good, type: 'invoice.voided', ...override } as NewOutboxEvent;
    const error = await refusedThenCommitted((manager) =>
      t.emitStore.enqueue(manager, [good, bad]),
    );
    expect(error).toBeInstanceOf(OutboxPayloadNotSerializableError);
    expect(error).toMatchObject({ eventType: 'invoice.voided', path, reason });
    expect((error as Error).message).toBe(
      `Outbox event "invoice.voided" is not JSON-serialisable: ${path} is ${reason}`,
    );
  });

  it.each([5_000, 100_000])('refuses a payload nested %d levels deep', async (depth) => {
    let payload: unknown = { leaf: true };
    for (let i = 0; i < depth; i++) payload = { child: payload };
    const error = await refusedThenCommitted((manager) =>
      publisher.emit({ ...good, payload }, { manager }),
    );
    expect(error).toBeInstanceOf(OutboxPayloadNotSerializableError);
    expect(error).toMatchObject({ reason: 'nested deeper than 256 levels' });
    expect((error as OutboxPayloadNotSerializableError).path).toMatch(
      /^payload(\.child)+…(\.child)+$/,
    );
    expect((error as Error).message.length).toBeLessThan(600);
  });

  it.each([
    ['type', 'invoice.\u0000paid', 'containing NUL (\\u0000)', '"invoice.\\u0000paid"'],
    ['aggregateType', 'invoice\u0000', 'containing NUL (\\u0000)', '"invoice\\u0000"'],
    ['aggregateId', 'inv-\ud800', 'containing a lone UTF-16 surrogate', '"inv-\\ud800"'],
    ['organizationId', '\u0000', 'containing NUL (\\u0000)', '"\\u0000"'],
    ['requestId', 'req-\udfff', 'containing a lone UTF-16 surrogate', '"req-\\udfff"'],
  ])('refuses %s %j, naming the field', async (field, value, problem, shown) => {
    const error = await refusedThenCommitted((manager) =>
      publisher.emit([good, { ...good, [field]: value }], { manager }),
    );
    expect(error).toBeInstanceOf(InvalidOutboxEventError);
    expect(error).toMatchObject({
      field,
      message: `Invalid outbox event: ${field} must be a string not ${problem}, got ${shown}`,
    });
  });

  it('echoes only the start of a long refused field', async () => {
    const aggregateId = `${'x'.repeat(10_000)}\u0000`;
    const error = await refusedThenCommitted((manager) =>
      t.emitStore.enqueue(manager, { ...good, aggregateId }),
    );
    expect(error).toMatchObject({ field: 'aggregateId', value: `${'x'.repeat(64)}…` });
    expect((error as Error).message.length).toBeLessThan(200);
  });

  it('puts no payload value in the error', async () => {
    const error = await refusedThenCommitted((manager) =>
      t.emitStore.enqueue(manager, { ...good, payload: { apiKey: 'hunter2-\u0000' } }),
    );
    expect(error).toBeInstanceOf(OutboxPayloadNotSerializableError);
    expect((error as Error).message).not.toContain('hunter2');
  });
});

describe('OutboxLeaseStore store failures', () => {
  it('returns a typed, scrubbed OutboxStoreError instead of throwing', async () => {
    const runner = t.db.dataSource.createQueryRunner();
    await runner.connect();
    await runner.query(`ALTER TABLE outbox_event RENAME TO outbox_event_away`);
    try {
      const claim = await t.repo.claim({ limit: 10, leaseMs: 1000 });
      expect(claim.ok).toBe(false);
      if (claim.ok) return;
      expect(claim.error).toBeInstanceOf(OutboxStoreError);
      expect(claim.error).toMatchObject({ operation: 'claim', code: '42P01' });
      expect(claim.error.message).toBe(
        'Outbox claim failed: relation "outbox_event" does not exist',
      );

      for (const [operation, result] of [
        ['pendingState', await t.repo.pendingState()],
        ['exactState', await t.repo.exactState()],
        ['nextDue', await t.repo.nextDue()],
      ] as const) {
        expect(result).toMatchObject({ ok: false, error: { operation, code: '42P01' } });
      }
      const sweep = await t.retention.sweep({ retentionMs: 1000, batchSize: 10 });
      expect(sweep).toMatchObject({ ok: false, error: { operation: 'sweep' } });
    } finally {
      await runner.query(`ALTER TABLE outbox_event_away RENAME TO outbox_event`);
      await runner.release();
    }
  });

  it('reports a lock timeout with its SQLSTATE, so callers can tell it from other failures', async () => {
    // The store's own lock_timeout (SET LOCAL in its statement's transaction), not a session
    // setting: that also holds behind a transaction pooler, which keeps no session settings.
    const impatient = new OutboxLeaseStore(t.db.dataSource, { lockTimeoutMs: 100 });
    const locker = await t.db.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE outbox_event IN ACCESS EXCLUSIVE MODE');
      const result = await impatient.markDelivered([
        { id: '00000000-0000-7000-8000-000000000000', attempts: 1, handlers: ['h'] },
      ]);
      expect(result).toMatchObject({
        ok: false,
        error: { operation: 'markDelivered', code: '55P03', name: 'OutboxStoreError' },
      });
    } finally {
      await locker.query('ROLLBACK');
    }
  });
});

describe('OutboxAdmin.replay by ids (formerly OutboxLeaseStore.replayDead)', () => {
  it('makes dead events due now, leaving live, delivered and leased (replaying) ones alone', async () => {
    await t.sql.query('TRUNCATE outbox_event');
    const ids = {
      dead: '0190a000-0000-7000-8000-000000000001',
      replaying: '0190a000-0000-7000-8000-000000000002',
      live: '0190a000-0000-7000-8000-000000000003',
      delivered: '0190a000-0000-7000-8000-000000000004',
    };
    await t.sql.query(
      `INSERT INTO outbox_event
         (id, type, aggregate_type, aggregate_id, payload, next_attempt_at, dead_at,
          lease_expires_at, dispatched_at)
       VALUES ($1, 't', 'a', '1', '{}', now() + interval '6 hours', now(), NULL, NULL),
              ($2, 't', 'a', '2', '{}', now() + interval '1 minute', now(),
               now() + interval '1 minute', NULL),
              ($3, 't', 'a', '3', '{}', now() + interval '1 hour', NULL, NULL, NULL),
              ($4, 't', 'a', '4', '{}', now() + interval '1 hour', NULL, NULL, now())`,
      Object.values(ids),
    );

    const admin = new OutboxAdmin(new AdminStore(t.db.dataSource));
    const replayed = await admin.replay({ ids: Object.values(ids) });
    expect(replayed.ids).toEqual([ids.dead]);
    const { rows } = await t.sql.query(
      `SELECT id, next_attempt_at <= now() AS due FROM outbox_event WHERE id = ANY ($1) ORDER BY id`,
      [Object.values(ids)],
    );
    expect(rows.map((r) => [r.id, r.due])).toEqual([
      [ids.dead, true],
      [ids.replaying, false],
      [ids.live, false],
      [ids.delivered, false],
    ]);
  });
});

describe('OutboxLeaseStore with a DataSource from a second copy of typeorm', () => {
  it('claims and settles through any object shaped like a PostgreSQL DataSource, not only instances of this copy', async () => {
    // What npm link or some pnpm layouts give: a DataSource whose class is another copy's.
    const foreign = { driver: t.db.dataSource.driver, options: t.db.dataSource.options };
    expect(foreign).not.toBeInstanceOf(DataSource);
    const viaForeign = new OutboxLeaseStore(foreign as unknown as DataSource);
    const emitViaForeign = new OutboxEmitStore(foreign as unknown as DataSource);
    await t.db.dataSource.transaction((manager) => emitViaForeign.enqueue(manager, good));

    const claimed = await viaForeign.claim({ limit: 10, leaseMs: 60_000 });
    expect(claimed).toMatchObject({ ok: true, value: [{ type: 'invoice.paid', attempts: 1 }] });
    const [record] = claimed.ok ? claimed.value : [];
    expect(
      await viaForeign.markDelivered([
        { id: record.id, attempts: record.attempts, handlers: ['audit'] },
      ]),
    ).toMatchObject({ ok: true });
    const { rows } = await t.sql.query(
      'SELECT dispatched_at IS NOT NULL AS done FROM outbox_event',
    );
    expect(rows).toEqual([{ done: true }]);
  });
});
