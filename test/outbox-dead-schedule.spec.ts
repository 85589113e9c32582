import { Injectable, type INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OnOutboxEvent, OutboxAdmin, OutboxPublisher, type OutboxModuleOptions } from '@app/outbox';
import { drainUntilIdle, outboxTestingOptions } from '@app/outbox/testing';
import { createTestDatabase, type TestDatabase } from './support/test-database';
import { createOutboxApp, eventually } from './support/outbox-app';

/**
 * A dead row's next replay follows the running configuration: written when it died, from that
 * day's `deadRetryMs`, it comes forward when an engine starts with a shorter schedule or with
 * replays turned back on, and never goes back.
 */

let failing = true;

@Injectable()
class Handlers {
  @OnOutboxEvent('mailer', { events: ['member.invited', 'report.requested'] })
  mailer() {
    if (failing) throw new Error('SMTP 421 busy');
  }
}

let db: TestDatabase;
const apps: INestApplication[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
});

afterAll(async () => {
  for (const app of apps) await app.close().catch(() => undefined);
  await db?.close();
});

async function start(outbox: OutboxModuleOptions): Promise<INestApplication> {
  const app = await createOutboxApp({ url: db.url, outbox, providers: [Handlers] });
  apps.push(app);
  return app;
}

async function nextReplays(): Promise<Record<string, Date>> {
  const rows = await db.dataSource.query<{ aggregate_id: string; next_attempt_at: Date }[]>(
    `SELECT aggregate_id, next_attempt_at FROM outbox_event
     WHERE aggregate_type = 'member' AND dead_at IS NOT NULL`,
  );
  return Object.fromEntries(rows.map((r) => [r.aggregate_id, r.next_attempt_at]));
}

it('brings dead rows forward to a shorter or re-enabled schedule, leaves discarded rows alone, and never pushes one back', async () => {
  // Dead under an hour's schedule, and under none for one type.
  const first = await start(
    outboxTestingOptions({
      maxAttempts: 1,
      deadRetryMs: 3_600_000,
      deadRetryByType: { 'report.requested': 0 },
    }),
  );
  await first.get(DataSource).transaction((manager) =>
    first.get(OutboxPublisher).emit(
      ['m-1', 'm-2', 'm-3'].map((id) => ({
        type: id === 'm-3' ? 'report.requested' : 'member.invited',
        aggregateType: 'member',
        aggregateId: id,
        payload: {},
      })),
      { manager },
    ),
  );
  await drainUntilIdle(first);
  const [discarded] = (await first.get(OutboxAdmin).list({ aggregateId: 'm-2' })).items;
  await first.get(OutboxAdmin).discard({ ids: [discarded.id] }, { reason: 'test' });
  const before = await nextReplays();
  expect(before['m-1'].getTime()).toBeGreaterThan(Date.now() + 3_500_000);
  expect(before['m-3'].getUTCFullYear()).toBe(9999);
  await first.close();

  // A longer schedule, replays still off for reports, moves nothing.
  const longer = await start({
    deadRetryMs: 7_200_000,
    deadRetryByType: { 'report.requested': 0 },
    tuning: { pollIntervalMs: 60_000 },
  });
  await new Promise((resolve) => setTimeout(resolve, 1000));
  expect(await nextReplays()).toEqual(before);
  await longer.close();

  // A shorter one, with replays on for every type: both come forward and are replayed.
  failing = false;
  const shorter = await start({ deadRetryMs: 1000, tuning: { pollIntervalMs: 60_000 } });
  await eventually('the dead events to be replayed and delivered', async () => {
    const rows = await db.dataSource.query<{ aggregate_id: string }[]>(
      `SELECT aggregate_id FROM outbox_event
       WHERE aggregate_type = 'member' AND dispatched_at IS NOT NULL ORDER BY 1`,
    );
    return rows.map((r) => r.aggregate_id).join() === 'm-1,m-3';
  });
  expect((await nextReplays())['m-2']).toEqual(before['m-2']);
  await shorter.close();
});
