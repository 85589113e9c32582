import { Injectable } from '@nestjs/common';
import { TransactionHost } from '@nestjs-cls/transactional';
import { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  OutboxEngine,
  OutboxHandlerTransactionEndedError,
  OutboxPublisher,
  type NewOutboxEvent,
  type OutboxEvent,
  type TransactionalHandlerContext,
} from '@app/outbox';
import { invoicePaid } from './support/events';
import { clsTransactionsModule } from './support/cls-transactions';
import { eventRow, useTestApp } from './support/test-database';
import {
  createOutboxApp,
  deferred,
  emitCommitted,
  eventually,
  takeOverLease,
  heldHandler,
} from './support/outbox-app';

/**
 * Transactional handlers on a real PostgreSQL: the handler's writes and its delivery record
 * commit together or not at all, so its effects happen exactly once with no idempotency key.
 * The effect table has no unique constraint on purpose: only the outbox keeps rows single.
 */

type Behaviour = (event: OutboxEvent, ctx: TransactionalHandlerContext) => unknown;
const behaviour: { ledger?: Behaviour; services?: Behaviour; mailer?: () => unknown } = {};
const errors: unknown[] = [];

/** What a handler does: write one effect row for the event, through the handler's transaction. */
async function writeEffect(event: OutboxEvent, ctx: TransactionalHandlerContext): Promise<void> {
  await ctx.manager.query(`INSERT INTO effect (event_id, handler) VALUES ($1, $2)`, [
    event.id,
    ctx.handlerName,
  ]);
}

@Injectable()
class Ledger {
  @OnOutboxEvent('ledger', {
    events: ['invoice.paid', 'invoice.refunded'],
    transaction: true,
    timeoutMs: 400,
  })
  async handle(event: OutboxEvent, ctx: TransactionalHandlerContext) {
    try {
      await writeEffect(event, ctx);
      await behaviour.ledger?.(event, ctx);
    } catch (error) {
      errors.push(error);
      throw error;
    }
  }
}

/** A plain handler beside `ledger` on refunds: writes its effect on its own. */
@Injectable()
class Mailer {
  constructor(private readonly dataSource: DataSource) {}

  @OnOutboxEvent('mailer', { events: ['invoice.refunded'] })
  async handle(event: OutboxEvent) {
    await this.dataSource.query(`INSERT INTO effect (event_id, handler) VALUES ($1, 'mailer')`, [
      event.id,
    ]);
    await behaviour.mailer?.();
  }
}

/** Writes through the ambient transaction only, the way an app's own services would. */
@Injectable()
class EffectService {
  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  async write(eventId: string): Promise<void> {
    await this.txHost.tx.query(`INSERT INTO effect (event_id, handler) VALUES ($1, 'services')`, [
      eventId,
    ]);
  }
}

@Injectable()
class ThroughServices {
  constructor(private readonly effects: EffectService) {}

  @OnOutboxEvent('services', { events: ['member.invited'], transaction: true })
  async handle(event: OutboxEvent, ctx: TransactionalHandlerContext) {
    await this.effects.write(event.id);
    await behaviour.services?.(event, ctx);
  }
}

/** The isolation level each run of `Snapshot` saw, in run order. */
const levelsSeen: string[] = [];

@Injectable()
class Snapshot {
  @OnOutboxEvent('snapshot', {
    events: ['report.requested'],
    transaction: { isolationLevel: 'REPEATABLE READ' },
  })
  async handle(_event: OutboxEvent, ctx: TransactionalHandlerContext) {
    const [row] = await ctx.manager.query<{ level: string }[]>(
      `SELECT current_setting('transaction_isolation') AS level`,
    );
    levelsSeen.push(row.level);
  }
}

const t = useTestApp(
  async (db) => {
    await db.dataSource.query(
      `CREATE TABLE effect (event_id uuid NOT NULL, handler text NOT NULL)`,
    );
    await db.dataSource.query(`CREATE TABLE counter (id int PRIMARY KEY, n int NOT NULL)`);
    return createOutboxApp({
      url: db.url,
      outbox: {
        autoStart: false,
        maxAttempts: 5,
        handlerTimeoutMs: 400,
        leaseMs: 5000,
        retry: { baseMs: 1, maxMs: 1, jitter: 0 },
        retention: { enabled: false },
      },
      imports: [clsTransactionsModule()],
      providers: [Ledger, Mailer, EffectService, ThroughServices, Snapshot],
    });
  },
  { truncateEach: ['outbox_event', 'effect', 'counter'] },
);
let engine: OutboxEngine;

beforeAll(() => {
  engine = t.app.get(OutboxEngine);
});

beforeEach(async () => {
  delete behaviour.ledger;
  delete behaviour.services;
  delete behaviour.mailer;
  errors.length = 0;
  await t.sql.query('INSERT INTO counter VALUES (1, 0)');
});

const paid = invoicePaid;

const emit = (event: NewOutboxEvent) => emitCommitted(t.app, event);

async function effects(eventId: string): Promise<number> {
  const { rows } = await t.sql.query('SELECT count(*)::int AS n FROM effect WHERE event_id = $1', [
    eventId,
  ]);
  return rows[0].n;
}

const outboxRow = (id: string) => eventRow(t.sql, id);

/**
 * Whether the event's row was last written by the transaction that wrote the `ledger` effect:
 * the handler's own commit delivered the event, with no settle after it.
 */
async function deliveredByLedgerCommit(eventId: string): Promise<boolean> {
  const { rows } = await t.sql.query(
    `SELECT e.xmin::text = f.xmin::text AS same
     FROM outbox_event AS e JOIN effect AS f ON f.event_id = e.id AND f.handler = 'ledger'
     WHERE e.id = $1`,
    [eventId],
  );
  return rows[0].same;
}

describe('transactional handlers', () => {
  it("commit the handler's writes with its delivery record", async () => {
    const id = await emit(paid());
    const report = await engine.drainOnce();

    expect(report).toMatchObject({ claimed: 1, delivered: 1, failed: 0 });
    expect(await effects(id)).toBe(1);
    const row = await outboxRow(id);
    expect(row.dispatched_at).not.toBeNull();
    expect(Object.keys(row.deliveries)).toEqual(['ledger']);
  });

  it("deliver the event in the commit of its last handler's transaction, with no settle after it", async () => {
    const id = await emit(paid());
    expect(await engine.drainOnce()).toMatchObject({ claimed: 1, delivered: 1 });

    const row = await outboxRow(id);
    expect(row).toMatchObject({ lease_expires_at: null, last_error: null });
    expect(row.dispatched_at).not.toBeNull();
    expect(await deliveredByLedgerCommit(id)).toBe(true);
  });

  it('settle an event after all its handlers when another runs beside the transactional one', async () => {
    const id = await emit(paid({ type: 'invoice.refunded' }));
    expect(await engine.drainOnce()).toMatchObject({ claimed: 1, delivered: 1 });

    const row = await outboxRow(id);
    expect(row.dispatched_at).not.toBeNull();
    expect(Object.keys(row.deliveries).sort()).toEqual(['ledger', 'mailer']);
    expect(await deliveredByLedgerCommit(id)).toBe(false);
  });

  it('deliver the event in the commit of a transactional handler left alone on a retry', async () => {
    let failures = 1;
    behaviour.ledger = () => {
      if (failures-- > 0) throw new Error('ledger down');
    };
    const id = await emit(paid({ type: 'invoice.refunded' }));
    expect(await engine.drainOnce()).toMatchObject({ claimed: 1, failed: 1 });
    expect((await outboxRow(id)).dispatched_at).toBeNull();

    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(await engine.drainOnce()).toMatchObject({ claimed: 1, delivered: 1 });
    const row = await outboxRow(id);
    expect(row.dispatched_at).not.toBeNull();
    expect(Object.keys(row.deliveries).sort()).toEqual(['ledger', 'mailer']);
    expect(await effects(id)).toBe(2);
    expect(await deliveredByLedgerCommit(id)).toBe(true);
  });

  it('run at the isolation level each handler declares, through the ambient transaction host and without one', async () => {
    levelsSeen.length = 0;
    behaviour.ledger = async (_event, ctx) => {
      const [row] = await ctx.manager.query<{ level: string }[]>(
        `SELECT current_setting('transaction_isolation') AS level`,
      );
      levelsSeen.push(`ledger: ${row.level}`);
    };
    const report = {
      type: 'report.requested',
      aggregateType: 'report',
      aggregateId: 'r-1',
      payload: {},
    };
    await emit(paid({ aggregateId: 'inv-iso' }));
    await emit(report);
    await engine.drainOnce();
    expect(levelsSeen.sort()).toEqual(['ledger: read committed', 'repeatable read']);

    // An app without @nestjs-cls/transactional: the outbox opens the transaction itself.
    levelsSeen.length = 0;
    const plain = await createOutboxApp({
      url: t.db.url,
      outbox: { autoStart: false, retention: { enabled: false } },
      providers: [Snapshot],
    });
    try {
      await plain
        .get(DataSource)
        .transaction((manager) =>
          plain.get(OutboxPublisher).emit({ ...report, aggregateId: 'r-2' }, { manager }),
        );
      await plain.get(OutboxEngine).drainOnce();
      expect(levelsSeen).toEqual(['repeatable read']);
    } finally {
      await plain.close();
    }
  });

  it('roll back every write of a handler that throws, and run it again on the retry', async () => {
    let failures = 1;
    behaviour.ledger = () => {
      if (failures-- > 0) throw new Error('downstream said no');
    };
    const id = await emit(paid());

    expect(await engine.drainOnce()).toMatchObject({ claimed: 1, failed: 1 });
    expect(await effects(id)).toBe(0);
    expect((await outboxRow(id)).deliveries).toEqual({});

    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(await engine.drainOnce()).toMatchObject({ claimed: 1, delivered: 1 });
    expect(await effects(id)).toBe(1);
  });

  it('write nothing when the lease was taken over while the handler ran', async () => {
    const held = heldHandler();
    behaviour.ledger = held.run;
    const id = await emit(paid());
    const drained = engine.drainOnce();
    await held.running;
    expect(await takeOverLease(t.app, id)).toEqual([2]);
    held.proceed();

    const report = await drained;
    expect(report).toMatchObject({ claimed: 1, delivered: 0, stale: 1 });
    expect(errors).toEqual([]);
    expect(await effects(id)).toBe(0);
    expect((await outboxRow(id)).deliveries).toEqual({});
  });

  it('roll back a handler over its budget at once, releasing its locks, even if it never returns', async () => {
    const never = deferred();
    behaviour.ledger = async (_event, ctx) => {
      await ctx.manager.query(`UPDATE counter SET n = n + 1 WHERE id = 1`);
      await never.promise; // ignores its signal
    };
    const id = await emit(paid());

    const report = await engine.drainOnce();
    expect(report).toMatchObject({ claimed: 1, failed: 1 });
    // The row lock is free: this would wait (and fail at lock_timeout) if the transaction lived.
    await t.sql.query(`SET lock_timeout = '2s'`);
    await t.sql.query(`UPDATE counter SET n = n WHERE id = 1`);
    await t.sql.query(`RESET lock_timeout`);
    const { rows } = await t.sql.query(`SELECT n FROM counter WHERE id = 1`);
    expect(rows[0].n).toBe(0);
    expect(await effects(id)).toBe(0);
    expect((await outboxRow(id)).last_error).toMatch(/ledger: .*400 ms budget/);
    never.resolve();
  });

  it('roll back a handler abandoned at shutdown, releasing its locks; the event keeps its lease and runs again', async () => {
    const stuck = deferred();
    const never = deferred();
    behaviour.ledger = async (_event, ctx) => {
      await ctx.manager.query(`UPDATE counter SET n = n + 1 WHERE id = 1`);
      stuck.resolve();
      await never.promise; // ignores its signal
    };
    const id = await emit(paid());
    const worker = await createOutboxApp({
      url: t.db.url,
      outbox: {
        handlerTimeoutMs: 10_000,
        leaseMs: 30_000,
        shutdownGraceMs: 100,
        retention: { enabled: false },
      },
      providers: [Ledger, EffectService, ThroughServices],
      imports: [clsTransactionsModule()],
    });
    await stuck.promise;
    // The engine's stop, as the first shutdown step: the DataSource is still open, so what
    // frees the lock is the rollback, not the pool closing its connections.
    await worker.get(OutboxEngine).stop();

    // The row lock is free: this would wait (and fail at lock_timeout) if the transaction lived.
    await t.sql.query(`SET lock_timeout = '2s'`);
    await t.sql.query(`UPDATE counter SET n = n WHERE id = 1`);
    await t.sql.query(`RESET lock_timeout`);
    await worker.close();
    expect((await t.sql.query(`SELECT n FROM counter WHERE id = 1`)).rows[0].n).toBe(0);
    expect(await effects(id)).toBe(0);
    const row = await outboxRow(id);
    expect(row).toMatchObject({ attempts: 1, deliveries: {}, last_error: null });
    expect(row.lease_expires_at).not.toBeNull();

    // Once the lease is over, it runs again and commits.
    never.resolve();
    delete behaviour.ledger;
    await t.sql.query(
      `UPDATE outbox_event SET lease_expires_at = now(), next_attempt_at = now() WHERE id = $1`,
      [id],
    );
    expect(await engine.drainOnce()).toMatchObject({ claimed: 1, delivered: 1 });
    expect(await effects(id)).toBe(1);
  });

  it("cancel the handler's running statement at its budget, and discard its connection", async () => {
    const outcome = deferred<unknown>();
    behaviour.ledger = async (_event, ctx) => {
      // Only the cancel can stop this statement: the handler lifted the statement timeout.
      await ctx.manager.query(`SET LOCAL statement_timeout = 0`);
      await ctx.manager.query(`SELECT pg_sleep(30)`).then(
        () => outcome.resolve('finished'),
        (error: Error) => outcome.resolve(error.message),
      );
      // Anything sent after the abort is refused: the transaction is gone.
      await ctx.manager.query(`UPDATE counter SET n = n + 1 WHERE id = 1`);
    };
    const id = await emit(paid());

    const report = await engine.drainOnce();
    expect(report).toMatchObject({ claimed: 1, failed: 1 });
    expect(await outcome.promise).toBe('Connection terminated');
    await eventually('the cancelled statement is gone from the server', async () => {
      const { rows } = await t.sql.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)'`,
      );
      return rows[0].n === 0;
    });
    expect((await t.sql.query(`SELECT n FROM counter WHERE id = 1`)).rows[0].n).toBe(0);
    expect(await effects(id)).toBe(0);
  });

  it('give follow-up events of ctx.emit causation and correlation, and commit them with the handler', async () => {
    const children: string[] = [];
    behaviour.ledger = async (event, ctx) => {
      if (event.payload && (event.payload as { child?: boolean }).child) return;
      children.push(
        await ctx.emit({
          type: 'invoice.paid',
          aggregateType: 'invoice',
          aggregateId: 'inv-2',
          payload: { child: true },
        }),
      );
      const [other] = await ctx.emit([
        {
          type: 'invoice.paid',
          aggregateType: 'invoice',
          aggregateId: 'inv-3',
          requestId: null,
          correlationId: 'own-chain',
          payload: { child: true },
        },
      ]);
      children.push(other);
    };
    const root = await emit(paid());
    const chained = await emit(paid({ correlationId: 'corr-7', aggregateId: 'inv-9' }));
    await engine.drainOnce();

    const { rows } = await t.sql.query(
      `SELECT id, causation_id, correlation_id, request_id, organization_id FROM outbox_event
       WHERE id = ANY ($1::uuid[]) ORDER BY id`,
      [children],
    );
    const byCause = (parent: string) => rows.filter((r) => r.causation_id === parent);
    expect(byCause(root)).toEqual([
      expect.objectContaining({
        correlation_id: root,
        request_id: 'req-1',
        organization_id: 'org-1',
      }),
      expect.objectContaining({ correlation_id: 'own-chain', request_id: null }),
    ]);
    expect(
      byCause(chained)
        .map((r) => r.correlation_id)
        .sort(),
    ).toEqual(['corr-7', 'own-chain']);
  });

  it('roll ctx.emit back with a handler that fails', async () => {
    let failures = 1;
    behaviour.ledger = async (event, ctx) => {
      if ((event.payload as { child?: boolean }).child) return;
      await ctx.emit({ type: 'thing.followed', aggregateType: 't', aggregateId: '1', payload: {} });
      if (failures-- > 0) throw new Error('after the emit');
    };
    const id = await emit(paid());

    await engine.drainOnce();
    const follow = `SELECT count(*)::int AS n FROM outbox_event WHERE causation_id = $1`;
    expect((await t.sql.query(follow, [id])).rows[0].n).toBe(0);

    await new Promise((resolve) => setTimeout(resolve, 5));
    await engine.drainOnce();
    expect((await t.sql.query(follow, [id])).rows[0].n).toBe(1);
  });

  it('refuse ctx.emit once the handler has returned', async () => {
    let late: TransactionalHandlerContext['emit'] | undefined;
    behaviour.ledger = (_event, ctx) => {
      late = ctx.emit;
    };
    await emit(paid());
    await engine.drainOnce();

    await expect(
      late!({ type: 'too.late', aggregateType: 't', aggregateId: '1', payload: {} }),
    ).rejects.toThrow(OutboxHandlerTransactionEndedError);
  });

  it("run the app's services in the handler's transaction through @nestjs-cls/transactional", async () => {
    let failures = 1;
    behaviour.services = () => {
      if (failures-- > 0) throw new Error('undo the service write');
    };
    const id = await emit({
      type: 'member.invited',
      aggregateType: 'm',
      aggregateId: '1',
      payload: {},
    });

    await engine.drainOnce();
    expect(await effects(id)).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 5));
    await engine.drainOnce();
    expect(await effects(id)).toBe(1);
    expect(Object.keys((await outboxRow(id)).deliveries)).toEqual(['services']);
  });
});
