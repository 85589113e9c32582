import { Injectable, type INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { Client, Notification } from 'pg';
import {
  DEFAULT_OUTBOX_CHANNEL,
  OnOutboxEvent,
  OutboxPublisher,
  type OutboxEvent,
  type OutboxModuleOptions,
} from '@app/outbox';
import { useTestDatabase } from './support/test-database';
import { createOutboxApp, withDefaults, deferred, eventually } from './support/outbox-app';

/**
 * Coalesced wakes (`tuning.wakeCoalesceMs`): emits within a window share one NOTIFY, and an emit that
 * went without one is still followed by a wake after its transaction commits, however late.
 */

const WINDOW_MS = 300;
const delivered = new Set<string>();

@Injectable()
class Recorder {
  @OnOutboxEvent('recorder', { events: '*' })
  handle(event: OutboxEvent) {
    delivered.add(event.id);
  }
}

const database = useTestDatabase();
let app: INestApplication | undefined;
let listener: Client;
const notifications: Notification[] = [];

beforeEach(async () => {
  delivered.clear();
  notifications.length = 0;
  await database.sql.query('TRUNCATE outbox_event');
  listener = await database.db.connect();
  listener.on('notification', (n) => notifications.push(n));
  await listener.query(`LISTEN ${DEFAULT_OUTBOX_CHANNEL}`);
});

afterEach(async () => {
  await app?.close();
  app = undefined;
  await listener.end();
});

async function start(outbox: OutboxModuleOptions): Promise<INestApplication> {
  // The poll is far beyond the 20 s `eventually` bound: only a NOTIFY can wake the engine.
  app = await createOutboxApp({
    url: database.db.url,
    outbox: withDefaults({ tuning: { pollIntervalMs: 600_000 } }, outbox),
    providers: [Recorder],
  });
  return app;
}

/** The earliest time the rows are due from, in epoch ms: their transactions' now(). */
async function dueFrom(ids: string[]): Promise<number> {
  const { rows } = await database.sql.query<{ ms: string }>(
    `SELECT floor(extract(epoch FROM min(occurred_at)) * 1000)::bigint::text AS ms
     FROM outbox_event WHERE id = ANY ($1::uuid[])`,
    [ids],
  );
  return Number(rows[0].ms);
}

function emitOne(target: INestApplication, n: number): Promise<string> {
  return target.get(DataSource).transaction((manager) =>
    target.get(OutboxPublisher).emit(
      {
        type: 'invoice.paid',
        aggregateType: 'invoice',
        aggregateId: `inv-${n}`,
        payload: { n },
      },
      { manager },
    ),
  );
}

describe('coalesced wakes', () => {
  it('a burst of emits in separate transactions sends one NOTIFY and one trailing wake, and every event is delivered', async () => {
    const running = await start({ tuning: { wakeCoalesceMs: WINDOW_MS } });
    const ids: string[] = [];
    for (let n = 0; n < 5; n++) ids.push(await emitOne(running, n));

    await eventually('every event delivered', () => ids.every((id) => delivered.has(id)));
    await eventually('the trailing wake', () => notifications.length >= 2);
    // Five commits, two notifications: the first emit's own, and one after the window.
    expect(notifications).toHaveLength(2);
    // Each names the time its rows are due from (their transaction's now(), in epoch ms): the
    // trailing one the earliest of the four emits it stands for, so a relay that claims from a
    // bound looks back far enough for every one of them.
    expect(notifications.map((n) => n.payload)).toEqual([
      String(await dueFrom(ids.slice(0, 1))),
      String(await dueFrom(ids.slice(1))),
    ]);
  });

  it('an emit without its own NOTIFY is woken after its transaction commits, even long after the window', async () => {
    const running = await start({ tuning: { wakeCoalesceMs: WINDOW_MS } });
    const first = await emitOne(running, 1);
    await eventually('the first event', () => delivered.has(first));

    const committing = deferred();
    const late = running.get(DataSource).transaction(async (manager) => {
      const id = await running
        .get(OutboxPublisher)
        .emit(
          { type: 'invoice.paid', aggregateType: 'invoice', aggregateId: 'late', payload: {} },
          { manager },
        );
      await committing.promise;
      return id;
    });
    // Hold the transaction open past the window and its emit-time trailing wake.
    await eventually('a wake while the transaction is open', () => notifications.length >= 2);
    const before = notifications.length;
    committing.resolve();
    const lateId = await late;

    await eventually('the wake after the commit', () => notifications.length > before);
    await eventually('the late event delivered', () => delivered.has(lateId));
    expect(notifications.at(-1)!.payload).toBe(String(await dueFrom([lateId])));
  });

  it('an emit in a nested transaction is woken after the outermost commit, not at its savepoint', async () => {
    const running = await start({ tuning: { wakeCoalesceMs: 1000 } });
    // Opens the window: the nested emit below goes without a NOTIFY of its own.
    await emitOne(running, 0);

    const committing = deferred();
    const outer = running.get(DataSource).transaction(async (manager) => {
      const id = await manager.transaction((inner) =>
        running
          .get(OutboxPublisher)
          .emit(
            { type: 'invoice.paid', aggregateType: 'invoice', aggregateId: 'nested', payload: {} },
            { manager: inner },
          ),
      );
      await committing.promise;
      return id;
    });
    await eventually('the wake planned at the emit', () => notifications.length >= 2);
    const before = notifications.length;
    committing.resolve();
    const nestedId = await outer;

    await eventually('the wake after the outer commit', () => notifications.length > before);
    await eventually('the nested event delivered', () => delivered.has(nestedId));
  });

  it('without tuning.wakeCoalesceMs every committed emit sends its NOTIFY', async () => {
    const running = await start({});
    for (let n = 0; n < 3; n++) await emitOne(running, n);
    await eventually('three notifications', () => notifications.length >= 3);
    expect(notifications).toHaveLength(3);
  });
});
