import { OutboxLeaseStore } from '@app/outbox';
import { AdminStore } from '@app/outbox/store/admin/admin.store';
import { NEVER_DUE } from '@app/outbox/store/outbox-row.sql';
import { useTestDatabase } from './support/test-database';
import { value } from './support/result-value';

/**
 * The operator's status (by type) and the engine's exact state count the same rows the same way:
 * one list of states (`STATE_COUNTS`) serves both. Rows in every state, of two types, with a
 * different count in each state so that a state counted as another shows.
 */

const t = useTestDatabase();

/** Each state, the columns that put a row in it, and how many rows of each type it gets. */
const STATES = {
  due: { set: `next_attempt_at = now() - interval '1 second'`, a: 3, b: 1 },
  retrying: { set: `next_attempt_at = now() + interval '1 minute', attempts = 1`, a: 2, b: 2 },
  parked: { set: `next_attempt_at = ${NEVER_DUE}`, a: 1, b: 0 },
  inFlight: {
    set: `next_attempt_at = now() + interval '1 minute', lease_expires_at = now() + interval '1 minute'`,
    a: 4,
    b: 1,
  },
  expiredLeases: {
    set: `next_attempt_at = now() - interval '2 seconds', lease_expires_at = now() - interval '2 seconds'`,
    a: 5,
    b: 0,
  },
  dead: { set: `dead_at = now(), next_attempt_at = now() + interval '1 hour'`, a: 6, b: 2 },
  discarded: {
    set: `dead_at = now(), discarded_at = now(), next_attempt_at = ${NEVER_DUE}`,
    a: 7,
    b: 3,
  },
  delivered: { set: `dispatched_at = now()`, a: 8, b: 8 },
} as const;

type State = keyof typeof STATES;
const COUNTED = ['due', 'retrying', 'parked', 'inFlight', 'expiredLeases', 'dead'] as const;

beforeAll(async () => {
  for (const [state, { set }] of Object.entries(STATES)) {
    for (const type of ['a', 'b'] as const) {
      const { rows } = await t.sql.query<{ id: string }>(
        `INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload)
         SELECT gen_random_uuid(), $1, 'thing', g::text, '{}'::jsonb
         FROM generate_series(1, $2::int) AS g
         RETURNING id`,
        [`state.${type}`, STATES[state as State][type]],
      );
      if (rows.length > 0)
        await t.sql.query(`UPDATE outbox_event SET ${set} WHERE id = ANY ($1::uuid[])`, [
          rows.map((r) => r.id),
        ]);
    }
  }
});

describe('state counts', () => {
  it('the status by type counts each state of each type', async () => {
    const byType = value(await new AdminStore(t.db.dataSource).backlogByType());
    for (const type of ['a', 'b'] as const) {
      const row = byType.find((r) => r.type === `state.${type}`)!;
      for (const state of [...COUNTED, 'discarded'] as const)
        expect([type, state, row[state]]).toEqual([type, state, STATES[state][type]]);
    }
  });

  it('the exact state counts what the status totals count, discarded and delivered rows left out', async () => {
    const exact = value(await new OutboxLeaseStore(t.db.dataSource).exactState());
    const byType = value(await new AdminStore(t.db.dataSource).backlogByType());
    for (const state of COUNTED) {
      const total = byType.reduce((sum, row) => sum + row[state], 0);
      expect([state, exact[state]]).toEqual([state, total]);
      expect([state, total]).toEqual([state, STATES[state].a + STATES[state].b]);
    }
    const lag = Math.max(...byType.map((row) => row.oldestDueWaitMs ?? 0));
    // The oldest due live row is an expired lease, 2 s old; both read it from the same clock.
    expect(exact.oldestDueWaitMs).toBeGreaterThanOrEqual(2_000);
    expect(Math.abs(exact.oldestDueWaitMs! - lag)).toBeLessThan(1_000);
  });
});
