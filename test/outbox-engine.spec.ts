import { Injectable, type INestApplication, type LoggerService } from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { Client } from 'pg';
import {
  OnOutboxEvent,
  OutboxEngine,
  OutboxHealthIndicator,
  OutboxLeaseStore,
  OutboxPublisher,
  type HandlerContext,
  type OutboxEvent,
  type OutboxModuleOptions,
} from '@app/outbox';
import { eventRow, useTestDatabase } from './support/test-database';
import { createOutboxApp, emitCommitted, eventually, useTestLeftovers } from './support/outbox-app';
import { eventsOn } from './support/events';
import { LogCapture } from './support/log-capture';
import { holdHorizon } from './support/horizon';

/**
 * The delivery engine through the real module: slots that refill while a slow event runs, an
 * overdue handler that keeps its slot, settles retried after a broken connection, claims bounded
 * by the lock timeout, and settles given up once the lease runs out.
 */

interface Call {
  event: OutboxEvent;
  ctx: HandlerContext;
}

const calls: Call[] = [];
/** What the handler does for an event, by its aggregate id; it returns at once otherwise. */
const behaviour = new Map<string, (event: OutboxEvent, ctx: HandlerContext) => unknown>();

@Injectable()
class TaskRunner {
  @OnOutboxEvent('run-task', { events: ['task.queued'] })
  handle(event: OutboxEvent, ctx: HandlerContext) {
    calls.push({ event, ctx });
    return behaviour.get(event.aggregateId)?.(event, ctx);
  }
}

/** Read `.db` and `.sql` inside tests and hooks only. */
const database = useTestDatabase({ truncateEach: ['outbox_event'] });
/** Sessions holding locks for a test; ended after it, which gives their locks back. */
const lockers: Client[] = [];

afterEach(async () => {
  await Promise.allSettled(lockers.splice(0).map((locker) => locker.end()));
});

const { hold, closeAfterTest } = useTestLeftovers();

beforeEach(() => {
  calls.length = 0;
  behaviour.clear();
});

async function start(
  outbox: OutboxModuleOptions = {},
  logger?: LoggerService,
): Promise<INestApplication> {
  const app = await createOutboxApp({
    url: database.db.url,
    outbox: { retention: { enabled: false }, ...outbox },
    providers: [TaskRunner],
    logger,
  });
  return closeAfterTest(app);
}

/** Emits one event per aggregate id in one committed transaction, so one claim sees them all. */
const emit = (app: INestApplication, aggregateIds: string[]) =>
  emitCommitted(
    app,
    eventsOn('task.queued', aggregateIds, (task) => ({ task })),
  );

const row = (id: string) => eventRow(database.sql, id);

async function delivered(ids: string[]): Promise<boolean> {
  const { rows } = await database.sql.query(
    'SELECT count(*)::int AS n FROM outbox_event WHERE id = ANY ($1::uuid[]) AND dispatched_at IS NOT NULL',
    [ids],
  );
  return rows[0].n === ids.length;
}

/** How many times the handler ran for the event of this aggregate id. */
function runsOf(aggregateId: string): number {
  return calls.filter((c) => c.event.aggregateId === aggregateId).length;
}

/** A session of the test's own for taking locks; ended after the test. */
async function lockSession(): Promise<Client> {
  const locker = await database.db.connect();
  lockers.push(locker);
  return locker;
}

/** Takes the row's lock in an open transaction of `locker`. */
async function lockRow(locker: Client, id: string): Promise<void> {
  await locker.query('BEGIN');
  const { rowCount } = await locker.query('SELECT id FROM outbox_event WHERE id = $1 FOR UPDATE', [
    id,
  ]);
  expect(rowCount).toBe(1);
}

/** Backends of this database running a delivered-settle statement that waits for a lock. */
async function settlesWaitingOnLock(): Promise<number[]> {
  const { rows } = await database.sql.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity
     WHERE datname = current_database()
       AND pid <> pg_backend_pid()
       AND state = 'active'
       AND wait_event_type = 'Lock'
       AND query LIKE '%SET dispatched_at = now()%'`,
  );
  return rows.map((r) => r.pid);
}

/**
 * Gives a running engine several chances to claim: each round wakes it, then lets a database
 * round trip and a few turns of the event loop pass, and checks that `check` still holds.
 */
async function throughClaimChances(
  engine: OutboxEngine,
  check: () => Promise<void>,
): Promise<void> {
  for (let round = 0; round < 10; round++) {
    engine.wake();
    await check();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('OutboxModule delivery engine', () => {
  it('refills a slot freed by a fast event while a slow event of the same claim still runs', async () => {
    const slow = hold();
    behaviour.set('slow', () => slow.promise);
    const app = await start({ concurrency: 2 });
    const engine = app.get(OutboxEngine);
    const [slowId, ...fastIds] = await emit(app, ['slow', 'fast-1', 'fast-2', 'fast-3', 'fast-4']);

    await eventually('every fast event is delivered while the slow one runs', () =>
      delivered(fastIds),
    );
    // The slow event came in the first claim (two slots, taken in emit order) and still runs.
    expect(calls.slice(0, 2).map((c) => c.event.id)).toContain(slowId);
    expect(runsOf('slow')).toBe(1);
    expect(await row(slowId)).toMatchObject({ attempts: 1, dispatched_at: null });
    expect(engine.slots).toEqual({ size: 2, busy: 1, overdue: 0 });

    slow.resolve();
    await eventually('the slow event is delivered', () => delivered([slowId]));
    for (const aggregateId of ['slow', 'fast-1', 'fast-2', 'fast-3', 'fast-4']) {
      expect(runsOf(aggregateId)).toBe(1);
    }
    for (const id of [slowId, ...fastIds]) {
      expect(await row(id)).toMatchObject({ attempts: 1, last_error: null });
    }
    await eventually('every slot is free', () => engine.slots.busy === 0);
  });

  it('an overdue handler that ignores its signal keeps its slot: the next event waits until it really returns', async () => {
    const hung = hold();
    // The first run of A ignores its AbortSignal and returns only when the test lets it.
    behaviour.set('a', () => (runsOf('a') === 1 ? hung.promise : undefined));
    const app = await start({
      concurrency: 1,
      handlerTimeoutMs: 300,
      leaseMs: 1500,
      retry: { baseMs: 200 },
    });
    const engine = app.get(OutboxEngine);
    const [a] = await emit(app, ['a']);
    await eventually('A runs', () => runsOf('a') === 1);
    const [b] = await emit(app, ['b']);

    await eventually('A is settled as failed once its budget is spent', async () => {
      return (await row(a)).last_error !== null;
    });
    const failed = await row(a);
    expect(failed).toMatchObject({ attempts: 1, dispatched_at: null, lease_expires_at: null });
    expect(failed.last_error).toContain('did not finish within its 300 ms budget');
    expect(calls[0].ctx.signal.aborted).toBe(true);

    // B may wait in the local queue, and goes back once its start would leave its budget no
    // room in the lease; it never starts while A holds the only slot.
    await throughClaimChances(engine, () => {
      expect(runsOf('b')).toBe(0);
      expect(engine.slots).toEqual({ size: 1, busy: 1, overdue: 1 });
      return Promise.resolve();
    });

    hung.resolve();
    await eventually('B is delivered and A on its second attempt', () => delivered([a, b]));
    await eventually('the slot is free', () => engine.slots.busy === 0);
    expect(engine.slots).toEqual({ size: 1, busy: 0, overdue: 0 });
    expect(runsOf('b')).toBe(1);
    expect(runsOf('a')).toBe(2);
    expect(await row(b)).toMatchObject({ attempts: 1 });
    expect(await row(a)).toMatchObject({ attempts: 2, last_error: null });
  });

  it.each([['without'], ['with']])(
    'an emit whose transaction commits after 1,000 later ones is delivered at its commit (%s a long transaction holding the xmin horizon)',
    async (horizon) => {
      // Ended after the test, with the other sessions of the test.
      if (horizon === 'with') await holdHorizon(lockSession);
      // The poll, which scans the whole due range, is far beyond the 20 s `eventually` bound:
      // only the late commit's own wake can have it claimed in time.
      const app = await start({ tuning: { pollIntervalMs: 120_000 } });
      const runner = app.get(DataSource).createQueryRunner();
      await runner.connect();
      try {
        await runner.startTransaction();
        const late = await app
          .get(OutboxPublisher)
          .emit(
            { type: 'task.queued', aggregateType: 'task', aggregateId: 'late', payload: {} },
            { manager: runner.manager },
          );
        const openedAt = Date.now();
        const later: string[] = [];
        while (later.length < 1000 || Date.now() - openedAt < 2000) {
          later.push(...(await emit(app, [`later-${later.length}`])));
        }
        await eventually('the later events are delivered', () => delivered(later));
        expect(runsOf('late')).toBe(0);

        await runner.commitTransaction();
        await eventually('the late event is delivered', () => delivered([late]));
        expect(runsOf('late')).toBe(1);
      } finally {
        await runner.release();
      }
    },
  );

  it('a queued event that waits out the local queue TTL goes back unstarted, and is not claimed again while no slot frees', async () => {
    const gate = hold();
    behaviour.set('q-1', () => gate.promise);
    const app = await start({ concurrency: 1, tuning: { localQueue: { ttlMs: 300 } } });
    const engine = app.get(OutboxEngine);
    const [running, ...queued] = await emit(app, ['q-1', 'q-2', 'q-3']);
    await eventually('q-1 runs', () => runsOf('q-1') === 1);

    await eventually('the queued events went back: unleased, attempt not counted, due', async () =>
      (await Promise.all(queued.map(row))).every(
        (r) => r.attempts === 0 && r.lease_expires_at === null,
      ),
    );
    await throughClaimChances(engine, async () => {
      expect(runsOf('q-2') + runsOf('q-3')).toBe(0);
      for (const r of await Promise.all(queued.map(row))) {
        expect(r).toMatchObject({ attempts: 0, lease_expires_at: null });
      }
    });

    gate.resolve();
    await eventually('every event is delivered', () => delivered([running, ...queued]));
    for (const id of [running, ...queued]) expect(await row(id)).toMatchObject({ attempts: 1 });
    expect(runsOf('q-2')).toBe(1);
    expect(runsOf('q-3')).toBe(1);
  });

  it('starts what a claim slower than the local queue TTL brought, in its free slots, without giving it back', async () => {
    const claim = OutboxLeaseStore.prototype.claim;
    const claimed: string[] = [];
    let slowed = false;
    // The first claim that brings events comes back after the queue's TTL, as on a busy server.
    jest.spyOn(OutboxLeaseStore.prototype, 'claim').mockImplementation(async function (
      this: OutboxLeaseStore,
      options,
    ) {
      const result = await claim.call(this, options);
      if (result.ok && result.value.length > 0) {
        claimed.push(...result.value.map((record) => record.id));
        if (!slowed) {
          slowed = true;
          await new Promise((resolve) => setTimeout(resolve, 600));
        }
      }
      return result;
    });
    try {
      const app = await start({ concurrency: 1, tuning: { localQueue: { ttlMs: 300 } } });
      const [id] = await emit(app, ['slow-claim']);
      await eventually('the event is delivered', () => delivered([id]));
      expect(claimed).toEqual([id]);
      expect(await row(id)).toMatchObject({ attempts: 1 });
    } finally {
      jest.restoreAllMocks();
    }
  });

  it('retries a delivered settle whose backend was terminated while it waited for a row lock', async () => {
    const gate = hold();
    behaviour.set('t-1', () => gate.promise);
    const app = await start({
      handlerTimeoutMs: 5000,
      leaseMs: 30_000,
      tuning: { lockTimeoutMs: 5000, statementTimeoutMs: 10_000 },
    });
    const engine = app.get(OutboxEngine);
    const locker = await lockSession();
    const [id] = await emit(app, ['t-1']);
    await eventually('the handler runs', () => runsOf('t-1') === 1);

    await lockRow(locker, id);
    gate.resolve();
    let firstTry: number | undefined;
    await eventually('the settle waits for the row lock', async () => {
      [firstTry] = await settlesWaitingOnLock();
      return firstTry !== undefined;
    });
    const { rows } = await database.sql.query('SELECT pg_terminate_backend($1) AS terminated', [
      firstTry,
    ]);
    expect(rows[0].terminated).toBe(true);

    // The settle is sent again, on another connection, and waits for the same lock.
    await eventually('the settle is retried', async () =>
      (await settlesWaitingOnLock()).some((pid) => pid !== firstTry),
    );
    await locker.query('ROLLBACK');

    await eventually('the event is delivered', () => delivered([id]));
    expect(await row(id)).toMatchObject({ attempts: 1, lease_expires_at: null, last_error: null });
    expect(Object.keys((await row(id)).deliveries)).toEqual(['run-task']);
    expect(runsOf('t-1')).toBe(1);
    await eventually('the settle failure is cleared', () => engine.settleFailure === null);
    expect(engine.state).toBe('running');
  });

  it('a held table lock makes the claim time out; the loop delivers once the lock goes', async () => {
    const logs = new LogCapture();
    const app = await start(
      { autoStart: false, tuning: { lockTimeoutMs: 100, failedDrainRetryMs: 200 } },
      logs,
    );
    const [id] = await emit(app, ['locked-out']);
    const locker = await lockSession();
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE outbox_event IN ACCESS EXCLUSIVE MODE');

    await app.get(OutboxEngine).start();
    await eventually('a claim fails on the lock timeout', () =>
      logs.matching('warn', 'Outbox claim failed').some((l) => l.message.includes('lock timeout')),
    );
    expect(runsOf('locked-out')).toBe(0);
    // Read inside the lock holder's transaction: any other session would wait for the lock.
    const { rows } = await locker.query(
      'SELECT attempts, dispatched_at, lease_expires_at FROM outbox_event WHERE id = $1',
      [id],
    );
    expect(rows).toEqual([{ attempts: 0, dispatched_at: null, lease_expires_at: null }]);

    await locker.query('ROLLBACK');
    await eventually('the event is delivered', () => delivered([id]));
    expect(runsOf('locked-out')).toBe(1);
    expect(await row(id)).toMatchObject({ attempts: 1 });
  });

  it('gives up settles the store keeps refusing past the lease, stops claiming and reports it on health, then recovers', async () => {
    const gate = hold();
    behaviour.set('s-1', () => (runsOf('s-1') === 1 ? gate.promise : undefined));
    const app = await start({
      leaseMs: 1500,
      handlerTimeoutMs: 300,
      tuning: { lockTimeoutMs: 100, failedDrainRetryMs: 3000 },
    });
    const engine = app.get(OutboxEngine);
    const health = app.get(OutboxHealthIndicator);
    // Connected up front, so the lock is taken well within the handler's budget.
    const locker = await lockSession();
    const [first] = await emit(app, ['s-1']);
    await eventually('the first handler runs', () => runsOf('s-1') === 1);

    // Every try of the first event's settle now fails on the lock timeout.
    await lockRow(locker, first);
    gate.resolve();
    await eventually('the settle is given up', () => (engine.settleFailure?.lost ?? 0) >= 1);
    expect(engine.settleFailure!.message).toContain('lock timeout');
    expect(engine.progress.claiming).toBe('paused');

    const [second] = await emit(app, ['s-2']);
    await throughClaimChances(engine, async () => {
      expect((await row(second)).attempts).toBe(0);
    });
    expect(runsOf('s-2')).toBe(0);
    const down = await health.isHealthy();
    expect(down.outbox).toMatchObject({
      status: 'down',
      message: expect.stringContaining('settles failing'),
      slots: { size: 20, busy: 0, overdue: 0 },
    });
    expect(down.outbox.settleFailure?.lost).toBeGreaterThanOrEqual(1);
    expect(await row(first)).toMatchObject({ attempts: 1, dispatched_at: null });

    await locker.query('ROLLBACK');
    await eventually('both events are delivered', () => delivered([first, second]));
    // The lost settle's price: the first event's handler ran again, on a new attempt.
    expect(runsOf('s-1')).toBe(2);
    expect(runsOf('s-2')).toBe(1);
    expect(await row(first)).toMatchObject({ attempts: 2 });
    expect(await row(second)).toMatchObject({ attempts: 1 });
    await eventually('the settle failure is cleared', () => engine.settleFailure === null);
    expect((await health.isHealthy()).outbox).toMatchObject({ status: 'up' });
    expect(engine.progress.claiming).toBe('running');
  });
});
