import { Injectable } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent } from '@app/outbox';
import { emitCommitted, useOutboxApp } from './support/outbox-app';
import { accountCredited } from './support/events';
import { nestedPlans, rowsRead, tableScans } from './support/query-plans';
import { NEVER_DUE } from '../libs/outbox/src/store/outbox-row.sql';

/**
 * A settle that frees a key makes the next event of the key due and wakes the instances, as an
 * emit does: with the poll an hour away, a key's queue still runs one event after another.
 */

const seen: number[] = [];

@Injectable()
class Handlers {
  @OnOutboxEvent('ledger', { events: ['account.credited'], ordered: true })
  ledger(event: OutboxEvent<{ n: number }>) {
    seen.push(event.payload.n);
  }
}

const t = useOutboxApp({
  outbox: { tuning: { pollIntervalMs: 3_600_000 }, retention: { enabled: false } },
  providers: [Handlers],
});

it("runs a key's queue to its end without waiting for a poll", async () => {
  const events = Array.from({ length: 20 }, (_, n) => accountCredited('42', n));
  await emitCommitted(t.app, events);
  const deadline = Date.now() + 15_000;
  while (seen.length < events.length && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  expect(seen).toEqual(events.map((_, n) => n));
});

it("wakes a key's next event reading that event alone, however long the key's queue", async () => {
  const keys = 500;
  const queued = 30;
  // Queues of `queued` events in `keys` keys: each head delivered to the ordered handler, the
  // events behind it parked.
  await t.sql.query(
    `INSERT INTO outbox_event
       (id, type, aggregate_type, aggregate_id, payload, ordering_key, ordering_position,
        ordered_for, deliveries, next_attempt_at)
     SELECT gen_random_uuid(), 'account.credited', 'account', 'wake-cost', '{}'::jsonb,
            'account:wake-cost-' || k, g, '{ledger}',
            CASE WHEN g = 1 THEN jsonb_build_object('ledger', now()) ELSE '{}'::jsonb END,
            CASE WHEN g = 1 THEN now() + interval '1 hour' ELSE ${NEVER_DUE} END
     FROM generate_series(1, $1::int) AS k, generate_series(1, $2::int) AS g`,
    [keys, queued],
  );
  await t.sql.query(
    `INSERT INTO outbox_ordering_wait (handler, key, waiting)
     SELECT 'ledger', 'account:wake-cost-' || k, $2 FROM generate_series(1, $1::int) AS k`,
    [keys, queued],
  );
  await t.sql.query('ANALYZE outbox_event');
  const heads = await t.sql.query<{ id: string }>(
    `SELECT id FROM outbox_event WHERE aggregate_id = 'wake-cost' AND ordering_position = 1
     ORDER BY ordering_key LIMIT 10`,
  );
  const { plans } = await nestedPlans(t.sql, `SELECT outbox_ordered_done_v1($1, '{}', 'outbox')`, [
    heads.rows.map((row) => row.id),
  ]);
  const wake = plans.find((p) => p.queryText.includes('SET next_attempt_at = now()'));
  expect(wake).toBeDefined();
  const read = tableScans(wake!.plan)
    .filter((scan) => scan['Index Name'] !== 'outbox_event_pkey')
    .reduce((sum, scan) => sum + rowsRead(scan), 0);
  // Each key's second event, and at most a few entries beside it; not the keys' whole queues.
  expect(read).toBeLessThanOrEqual(3 * heads.rows.length);
  await t.sql.query(`DELETE FROM outbox_event WHERE aggregate_id = 'wake-cost'`);
  await t.sql.query(`DELETE FROM outbox_ordering_wait WHERE key LIKE 'account:wake-cost-%'`);
});
