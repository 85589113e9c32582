import { Injectable } from '@nestjs/common';
import { Client } from 'pg';
import { OnOutboxEvent, type OutboxEvent } from '@app/outbox';
import { createOutboxApp, emitCommitted, eventually, useTestLeftovers } from './support/outbox-app';
import { eventsOn } from './support/events';
import { LogCapture } from './support/log-capture';
import { useTestDatabase } from './support/test-database';

/**
 * When the database answers again after the engine's claims failed, maybe as another server (a
 * failover), the settles acknowledged shortly before are written again: a new primary that lost
 * them (asynchronous replication ships a commit after acknowledging it) would otherwise hold
 * their events under the claim's lease and run their handlers again once it ends. The server
 * here plays that new primary: the rows are put back as their claims left them, and claims fail
 * on a held table lock until the lock goes.
 */

const calls: string[] = [];

@Injectable()
class Mailer {
  @OnOutboxEvent('mailer', { events: ['mail.queued'] })
  send(event: OutboxEvent) {
    calls.push(event.id);
  }
}

const t = useTestDatabase({ truncateEach: ['outbox_event'] });
const { closeAfterTest } = useTestLeftovers();
const lockers: Client[] = [];

afterEach(async () => {
  await Promise.allSettled(lockers.splice(0).map((locker) => locker.end()));
  calls.length = 0;
});

const LEASE_MS = 60_000;

async function delivered(ids: readonly string[]): Promise<boolean> {
  const { rows } = await t.sql.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM outbox_event WHERE id = ANY($1) AND dispatched_at IS NOT NULL',
    [ids],
  );
  return rows[0].n === ids.length;
}

/** The rows as their claims left them: leased for the claim's attempt, no delivery recorded. */
async function loseSettles(ids: readonly string[]): Promise<void> {
  await t.sql.query(
    `UPDATE outbox_event
     SET dispatched_at = NULL, deliveries = '{}', last_error = NULL,
         lease_expires_at = now() + make_interval(secs => $2 / 1000.0),
         next_attempt_at = now() + make_interval(secs => $2 / 1000.0)
     WHERE id = ANY($1)`,
    [ids, LEASE_MS],
  );
}

describe('OutboxModule when the database answers again', () => {
  it('writes again the settles the database lacks, so their handlers do not run again after the lease', async () => {
    const logs = new LogCapture();
    const app = closeAfterTest(
      await createOutboxApp({
        url: t.db.url,
        outbox: {
          leaseMs: LEASE_MS,
          retention: { enabled: false },
          // Claims every 50 ms, failing fast on the lock while it is held.
          tuning: { pollIntervalMs: 50, lockTimeoutMs: 50, failedDrainRetryMs: 50 },
        },
        providers: [Mailer],
        logger: logs,
      }),
    );
    const ids = await emitCommitted(
      app,
      eventsOn('mail.queued', ['a', 'b', 'c'], (to) => ({ to })),
    );
    await eventually('the events are delivered', () => delivered(ids));
    expect(calls.sort()).toEqual([...ids].sort());

    await loseSettles(ids);
    const locker = new Client({ connectionString: t.db.directUrl });
    lockers.push(locker);
    await locker.connect();
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE outbox_event IN ACCESS EXCLUSIVE MODE');
    await eventually('a claim fails on the lock', () =>
      logs.matching('warn', 'Outbox claim failed').some((l) => l.message.includes('lock timeout')),
    );
    await locker.query('ROLLBACK');

    await eventually('the lost settles are written again', () => delivered(ids));
    expect(calls).toHaveLength(ids.length);
    const { rows } = await t.sql.query<{ attempts: number; mailer: boolean }>(
      `SELECT attempts, deliveries ? 'mailer' AS mailer FROM outbox_event WHERE id = ANY($1)`,
      [ids],
    );
    expect(rows).toEqual(ids.map(() => ({ attempts: 1, mailer: true })));
    expect(logs.matching('warn', `wrote again ${ids.length} settles`)).toHaveLength(1);
  });
});
