import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { HandlerLimitStore, type AdmitRequest } from '@app/outbox/store/limits/handler-limit.store';
import { useTestDatabase } from './support/test-database';
import { value } from './support/result-value';

/**
 * The admission of a limited handler's run (`outbox_limit_admit_v1`) on a real PostgreSQL:
 * concurrent admissions from many connections, places a killed process never gave back, and
 * runs held back told to come back in turn.
 */

const t = useTestDatabase({ truncateEach: ['outbox_handler_limit', 'outbox_event'] });
let store: HandlerLimitStore;

beforeAll(() => {
  store = new HandlerLimitStore(t.db.dataSource);
});

function request(overrides: Partial<AdmitRequest> = {}): AdmitRequest {
  return {
    handler: 'partner-call',
    eventId: randomUUID(),
    perPartition: false,
    token: randomUUID(),
    holdMs: 60_000,
    maxConcurrent: null,
    rate: null,
    spacingMs: 10,
    ...overrides,
  };
}

describe('outbox_limit_admit_v1', () => {
  it('admits exactly maxConcurrent of 20 runs asking at once on 20 connections', async () => {
    const many = new DataSource({
      type: 'postgres',
      url: t.db.url,
      extra: { max: 20 },
    });
    await many.initialize();
    try {
      const stores = Array.from({ length: 20 }, () => new HandlerLimitStore(many));
      const answers = await Promise.all(stores.map((s) => s.admit(request({ maxConcurrent: 5 }))));
      expect(answers.filter((a) => value(a).admitted)).toHaveLength(5);
    } finally {
      await many.destroy();
    }
  });

  it('frees a place its run never gave back once its hold runs out (a killed process)', async () => {
    const killed = value(await store.admit(request({ maxConcurrent: 1, holdMs: 300 })));
    expect(killed.admitted).toBe(true);
    expect(value(await store.admit(request({ maxConcurrent: 1 }))).admitted).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 350));
    expect(value(await store.admit(request({ maxConcurrent: 1 }))).admitted).toBe(true);
  });

  it('keeps the places and the log of a limit whatever the limits of the pod that asks', async () => {
    // Pods of a rollout that adds a rate to a handler limited to 2 at once, and drops it again.
    for (let i = 0; i < 2; i++) {
      expect(value(await store.admit(request({ maxConcurrent: 2 }))).admitted).toBe(true);
    }
    const rate = { limit: 1, perMs: 60_000 };
    expect(value(await store.admit(request({ rate }))).admitted).toBe(true);
    expect(value(await store.admit(request({ maxConcurrent: 2 }))).admitted).toBe(false);
    expect(value(await store.admit(request({ rate }))).admitted).toBe(false);
  });

  it('frees a place at once when its run gives it back', async () => {
    const first = request({ maxConcurrent: 1 });
    expect(value(await store.admit(first)).admitted).toBe(true);
    value(await store.release(first.handler, '', first.token));
    expect(value(await store.admit(request({ maxConcurrent: 1 }))).admitted).toBe(true);
  });

  it('tells the runs it holds back to come back in turn, a spacing apart', async () => {
    const rate = { limit: 1, perMs: 1000 };
    const admitted = value(await store.admit(request({ rate, spacingMs: 1000 })));
    expect(admitted.admitted).toBe(true);
    const held = [];
    for (let i = 0; i < 3; i++) {
      const answer = value(await store.admit(request({ rate, spacingMs: 1000 })));
      if (answer.admitted) throw new Error('admitted past the rate');
      held.push(answer.retryAt.getTime());
    }
    // The first when the window has room (its 2 % margin included), each next one a spacing on.
    expect(held[0] - admitted.at.getTime()).toBeGreaterThanOrEqual(1020);
    expect(held[1] - held[0]).toBeGreaterThanOrEqual(1000);
    expect(held[2] - held[1]).toBeGreaterThanOrEqual(1000);
  });

  it('counts a limit per partition apart: the event’s partitionKey, else its organization', async () => {
    const { rows } = await t.sql.query<{ id: string }>(`
      INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, organization_id,
                                partition_key, payload)
      VALUES (gen_random_uuid(), 'call', 'call', '1', 'org-A', NULL, '{}'),
             (gen_random_uuid(), 'call', 'call', '2', 'org-A', 'import:A', '{}'),
             (gen_random_uuid(), 'call', 'call', '3', 'org-A', NULL, '{}')
      RETURNING id`);
    const [a1, importA, a2] = rows.map((row) => row.id);
    const ask = (eventId: string) =>
      store.admit(request({ maxConcurrent: 1, perPartition: true, eventId }));
    expect(value(await ask(a1))).toMatchObject({ admitted: true, partition: 'org-A' });
    expect(value(await ask(importA))).toMatchObject({ admitted: true, partition: 'import:A' });
    expect(value(await ask(a2))).toMatchObject({ admitted: false, partition: 'org-A' });
  });
});
