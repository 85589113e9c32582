import { Injectable } from '@nestjs/common';
import { Client } from 'pg';
import { EventSubscriber, type EntitySubscriberInterface } from 'typeorm';
import {
  OnOutboxEvent,
  OutboxEngine,
  type OutboxEvent,
  type TransactionalHandlerContext,
} from '@app/outbox';
import { invoicePaid } from './support/events';
import { eventRow, useTestApp } from './support/test-database';
import { createOutboxApp, emitCommitted, heldHandler, takeOverLease } from './support/outbox-app';

/**
 * Transactional handlers in an app without `@nestjs-cls/transactional`: the outbox begins the
 * transaction itself, with its setup in the same round trip, and commits it with the delivery
 * record. TypeORM still sees a transaction: its subscribers hear it, and a nested
 * `manager.transaction` is a savepoint. (The ambient host's path: outbox-transactional-handlers.)
 */

type Behaviour = (event: OutboxEvent, ctx: TransactionalHandlerContext) => unknown;
const behaviour: { ledger?: Behaviour } = {};

async function writeEffect(ctx: TransactionalHandlerContext, event: OutboxEvent, tag: string) {
  await ctx.manager.query(`INSERT INTO effect (event_id, handler) VALUES ($1, $2)`, [
    event.id,
    tag,
  ]);
}

@Injectable()
class Ledger {
  @OnOutboxEvent('ledger', { events: ['invoice.paid'], transaction: true, timeoutMs: 400 })
  async handle(event: OutboxEvent, ctx: TransactionalHandlerContext) {
    await writeEffect(ctx, event, 'ledger');
    await behaviour.ledger?.(event, ctx);
  }
}

/** What TypeORM's transaction subscribers heard, in order. */
const heard: string[] = [];

@EventSubscriber()
class TransactionWatcher implements EntitySubscriberInterface {
  beforeTransactionStart() {
    heard.push('before start');
  }
  afterTransactionStart() {
    heard.push('after start');
  }
  beforeTransactionCommit() {
    heard.push('before commit');
  }
  afterTransactionCommit() {
    heard.push('after commit');
  }
  afterTransactionRollback() {
    heard.push('after rollback');
  }
}

const t = useTestApp(
  async (db) => {
    await db.dataSource.query(
      `CREATE TABLE effect (event_id uuid NOT NULL, handler text NOT NULL)`,
    );
    return createOutboxApp({
      url: db.url,
      typeorm: { subscribers: [TransactionWatcher] },
      outbox: {
        autoStart: false,
        handlerTimeoutMs: 400,
        leaseMs: 5000,
        retry: { baseMs: 1, maxMs: 1, jitter: 0 },
        retention: { enabled: false },
      },
      providers: [Ledger],
    });
  },
  { truncateEach: ['outbox_event', 'effect'] },
);

beforeEach(() => {
  delete behaviour.ledger;
});

/** Emits an event in a transaction of its own; what the subscribers hear is counted from here. */
async function emitted(): Promise<string> {
  const id = await emitCommitted(t.app, invoicePaid());
  heard.length = 0;
  return id;
}

const drain = () => t.app.get(OutboxEngine).drainOnce();

async function effects(eventId: string): Promise<string[]> {
  const { rows } = await t.sql.query<{ handler: string }>(
    'SELECT handler FROM effect WHERE event_id = $1 ORDER BY handler',
    [eventId],
  );
  return rows.map((r) => r.handler);
}

/** The statements each pg client sent while `work` ran, in order. */
async function statementsSent(work: () => Promise<unknown>): Promise<Map<object, string[]>> {
  const sent = new Map<object, string[]>();
  const query = Client.prototype.query;
  Client.prototype.query = function (this: Client, ...args: unknown[]) {
    const [config] = args as [string | { text?: string }];
    const text = typeof config === 'string' ? config : (config?.text ?? '');
    sent.set(this, [...(sent.get(this) ?? []), text.replace(/\s+/g, ' ').trim()]);
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof query;
  try {
    await work();
  } finally {
    Client.prototype.query = query;
  }
  return sent;
}

describe("transactional handlers in the outbox's own transaction", () => {
  it('begin with their setup and commit with their delivery record: three round trips for a handler of one statement', async () => {
    const id = await emitted();
    const sent = await statementsSent(async () => {
      expect(await drain()).toMatchObject({ claimed: 1, delivered: 1, failed: 0 });
    });

    const [handlerConnection] = [...sent.values()].filter((texts) =>
      texts.some((text) => text.startsWith('INSERT INTO effect')),
    );
    const begun = handlerConnection.findIndex((text) => text.startsWith('START TRANSACTION'));
    const committed = handlerConnection.findIndex(
      (text, i) => i > begun && text.endsWith('COMMIT'),
    );
    expect(handlerConnection.slice(begun, committed + 1).map((text) => text.slice(0, 20))).toEqual([
      'START TRANSACTION; S',
      'INSERT INTO effect (',
      'WITH recorded AS ( U',
    ]);
    expect(await effects(id)).toEqual(['ledger']);
    expect(Object.keys((await eventRow(t.sql, id)).deliveries)).toEqual(['ledger']);
    expect(heard).toEqual(['before start', 'after start', 'before commit', 'after commit']);
  });

  it('write nothing when the lease was taken over while the handler ran', async () => {
    const held = heldHandler();
    behaviour.ledger = held.run;
    const id = await emitted();
    const drained = drain();
    await held.running;
    expect(await takeOverLease(t.app, id)).toEqual([2]);
    held.proceed();

    expect(await drained).toMatchObject({ claimed: 1, delivered: 0, stale: 1 });
    expect(await effects(id)).toEqual([]);
    expect((await eventRow(t.sql, id)).deliveries).toEqual({});
    expect(heard).toEqual(['before start', 'after start', 'before commit', 'after rollback']);
  });

  it('roll back every write of a handler that throws', async () => {
    behaviour.ledger = () => {
      throw new Error('downstream said no');
    };
    const id = await emitted();

    expect(await drain()).toMatchObject({ claimed: 1, failed: 1 });
    expect(await effects(id)).toEqual([]);
    expect(heard).toEqual(['before start', 'after start', 'after rollback']);
  });

  it('roll back a handler over its budget, even if it never returns', async () => {
    behaviour.ledger = () => new Promise(() => undefined);
    const id = await emitted();

    expect(await drain()).toMatchObject({ claimed: 1, failed: 1 });
    expect(await effects(id)).toEqual([]);
    const { rows } = await t.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'`,
    );
    expect(rows[0].n).toBe(0);
  });

  it('make savepoints of nested manager.transaction calls: a failed one rolls back its writes alone', async () => {
    behaviour.ledger = async (event, ctx) => {
      await ctx.manager
        .transaction(async (inner) => {
          await inner.query(`INSERT INTO effect (event_id, handler) VALUES ($1, 'failed')`, [
            event.id,
          ]);
          throw new Error('the inner step failed');
        })
        .catch(() => undefined);
      await ctx.manager.transaction((inner) =>
        inner.query(`INSERT INTO effect (event_id, handler) VALUES ($1, 'nested')`, [event.id]),
      );
    };
    const id = await emitted();

    expect(await drain()).toMatchObject({ claimed: 1, delivered: 1 });
    expect(await effects(id)).toEqual(['ledger', 'nested']);
  });
});
