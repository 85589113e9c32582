import type { Client } from 'pg';
import { DataSource } from 'typeorm';
import {
  InvalidOutboxEventError,
  OUTBOX_ENTITIES,
  OutboxPayloadNotSerializableError,
  OutboxRepository,
  OutboxStoreError,
  OutboxTransactionRequiredError,
  type NewOutboxEvent,
} from '@app/outbox';
import { createTestDatabase, type TestDatabase } from './support/test-database';

/** What enqueue refuses, and how database failures reach callers. */

let db: TestDatabase;
let repo: OutboxRepository;
let sql: Client;

beforeAll(async () => {
  db = await createTestDatabase();
  repo = new OutboxRepository(db.dataSource);
  sql = await db.connect();
});

afterAll(async () => {
  await db?.close();
});

beforeEach(async () => {
  await sql.query('TRUNCATE outbox_event');
});

const good: NewOutboxEvent = {
  type: 'invoice.paid',
  aggregateType: 'invoice',
  aggregateId: 'inv-1',
  payload: { amount: 100 },
};

async function count(): Promise<number> {
  const { rows } = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox_event');
  return rows[0].n;
}

describe('OutboxRepository.enqueue', () => {
  it('refuses the default manager, which runs outside any transaction', async () => {
    await expect(repo.enqueue(db.dataSource.manager, good)).rejects.toThrow(
      OutboxTransactionRequiredError,
    );
    expect(await count()).toBe(0);
  });

  it('refuses a query runner that has not started a transaction', async () => {
    const runner = db.dataSource.createQueryRunner();
    try {
      await expect(repo.enqueue(runner.manager, good)).rejects.toThrow(
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
      const error = await db.dataSource
        .transaction((manager) =>
          repo.enqueue(manager, [good, { ...good, type: 'invoice.voided', payload }]),
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
      db.dataSource.transaction((manager) => repo.enqueue(manager, { ...good, payload })),
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
      { metadata: [1] },
      'metadata',
      'Invalid outbox event: metadata must be a JSON object, got [1]',
    ],
  ])('refuses a malformed event field %j', async (override, field, message) => {
    const error = await db.dataSource
      .transaction((manager) => repo.enqueue(manager, { ...good, ...override } as NewOutboxEvent))
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidOutboxEventError);
    expect(error).toMatchObject({ field, message });
    expect(await count()).toBe(0);
  });

  it('writes every field of a valid batch and returns time-ordered ids in input order', async () => {
    const ids = await db.dataSource.transaction(async (manager) => {
      const result = await repo.enqueue(manager, [
        {
          ...good,
          organizationId: 'org-1',
          requestId: 'req-1',
          metadata: { traceparent: '00-ab' },
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
    const { rows } = await sql.query(
      `SELECT id, type, aggregate_type, aggregate_id, organization_id, request_id, payload, metadata,
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
      }),
    ]);
  });
});

describe('OutboxRepository store failures', () => {
  it('returns a typed, scrubbed OutboxStoreError instead of throwing', async () => {
    const runner = db.dataSource.createQueryRunner();
    await runner.connect();
    await runner.query(`ALTER TABLE outbox_event RENAME TO outbox_event_away`);
    try {
      const claim = await repo.claim({ limit: 10, leaseMs: 1000, deadRetryMs: 1000 });
      expect(claim.ok).toBe(false);
      if (claim.ok) return;
      expect(claim.error).toBeInstanceOf(OutboxStoreError);
      expect(claim.error).toMatchObject({ operation: 'claim', code: '42P01' });
      expect(claim.error.message).toBe(
        'Outbox claim failed: relation "outbox_event" does not exist',
      );

      const pending = await repo.pendingState({ deadRetryMs: 1000 });
      expect(pending).toMatchObject({ ok: false, error: { operation: 'pendingState' } });
      const sweep = await repo.sweep({ retentionMs: 1000, batchSize: 10 });
      expect(sweep).toMatchObject({ ok: false, error: { operation: 'sweep' } });
    } finally {
      await runner.query(`ALTER TABLE outbox_event_away RENAME TO outbox_event`);
      await runner.release();
    }
  });

  it('reports a lock timeout with its SQLSTATE, so callers can tell it from other failures', async () => {
    const impatient = new DataSource({
      type: 'postgres',
      url: db.url,
      entities: [...OUTBOX_ENTITIES],
      extra: { options: '-c lock_timeout=100' },
    });
    await impatient.initialize();
    const locker = await db.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE outbox_event IN ACCESS EXCLUSIVE MODE');
      const result = await new OutboxRepository(impatient).markDelivered([
        { id: '00000000-0000-7000-8000-000000000000', attempts: 1, handlers: ['h'] },
      ]);
      expect(result).toMatchObject({
        ok: false,
        error: { operation: 'markDelivered', code: '55P03', name: 'OutboxStoreError' },
      });
    } finally {
      await locker.query('ROLLBACK');
      await impatient.destroy();
    }
  });
});
