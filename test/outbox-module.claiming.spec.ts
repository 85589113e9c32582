import { Inject, Injectable } from '@nestjs/common';
import { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  OutboxEngine,
  OutboxPublisher,
  OutboxLeaseStore,
  type NewOutboxEvent,
  type OutboxEvent,
  type OutboxModuleOptions,
} from '@app/outbox';
import { createOutboxApp, deferred, eventually, useTestLeftovers } from './support/outbox-app';
import { eventRow, useTestDatabase } from './support/test-database';

/**
 * What the running engine claims: two instances sharing one table, a `types` filter, and
 * back-to-back drains while batches come back full. Every app here runs with autoStart on.
 */

interface Call {
  handler: string;
  eventId: string;
  type: string;
}

/**
 * The calls of one app instance. `peer` links two instances: each one's first handler run waits
 * until the other instance has run a handler too, so neither can finish the whole run alone
 * whatever the scheduling, and the other can only get there by claiming while this one holds
 * its leased rows.
 */
class InstanceLog {
  readonly calls: Call[] = [];
  peer: InstanceLog | undefined;
  private readonly started = deferred();

  async record(handler: string, event: OutboxEvent): Promise<void> {
    this.calls.push({ handler, eventId: event.id, type: event.type });
    this.started.resolve();
    await this.peer?.started.promise;
  }
}

const INSTANCE_LOG = Symbol('InstanceLog');

@Injectable()
class Ledger {
  constructor(@Inject(INSTANCE_LOG) private readonly log: InstanceLog) {}

  @OnOutboxEvent('ledger', { events: ['invoice.paid'] })
  handle(event: OutboxEvent) {
    return this.log.record('ledger', event);
  }
}

@Injectable()
class AuditLog {
  constructor(@Inject(INSTANCE_LOG) private readonly log: InstanceLog) {}

  @OnOutboxEvent('audit-log', { events: '*' })
  handle(event: OutboxEvent) {
    return this.log.record('audit-log', event);
  }
}

const t = useTestDatabase({ truncateEach: ['outbox_event'] });
const { closeAfterTest } = useTestLeftovers();

afterEach(() => {
  jest.restoreAllMocks();
});

interface Instance {
  engine: OutboxEngine;
  publisher: OutboxPublisher;
  dataSource: DataSource;
  log: InstanceLog;
}

/** One app instance on the test database, with its own handler instances and log. */
async function instance(outbox: OutboxModuleOptions = {}): Promise<Instance> {
  const log = new InstanceLog();
  const app = await createOutboxApp({
    url: t.db.url,
    outbox: { retention: { enabled: false }, ...outbox, autoStart: true },
    providers: [{ provide: INSTANCE_LOG, useValue: log }, Ledger, AuditLog],
  });
  closeAfterTest(app);
  return {
    engine: app.get(OutboxEngine),
    publisher: app.get(OutboxPublisher),
    dataSource: app.get(DataSource),
    log,
  };
}

const event = (type: string, aggregateId: string): NewOutboxEvent => ({
  type,
  aggregateType: type.split('.')[0],
  aggregateId,
  payload: { aggregateId },
});

function emit(at: Instance, events: NewOutboxEvent[]): Promise<string[]> {
  return at.dataSource.transaction((manager) => at.publisher.emit(events, { manager }));
}

async function undelivered(): Promise<number> {
  const { rows } = await t.sql.query(
    'SELECT count(*)::int AS n FROM outbox_event WHERE dispatched_at IS NULL',
  );
  return rows[0].n;
}

const row = (id: string) => eventRow(t.sql, id);

describe('OutboxModule claiming', () => {
  it('two instances on one database deliver 1,000 events with every handler run exactly once per event, and both take part', async () => {
    const a = await instance({ tuning: { batchSize: 25 } });
    const b = await instance({ tuning: { batchSize: 25 } });
    a.log.peer = b.log;
    b.log.peer = a.log;

    const ids: string[] = [];
    for (let tx = 0; tx < 100; tx++) {
      const batch = Array.from({ length: 10 }, (_, i) => event('invoice.paid', `inv-${tx}-${i}`));
      ids.push(...(await emit(tx % 2 === 0 ? a : b, batch)));
    }
    expect(new Set(ids).size).toBe(1000);
    await eventually('every event delivered', async () => (await undelivered()) === 0);

    // Settled rows had every handler return: nothing runs after the last settle.
    const runs = new Map<string, number>();
    for (const call of [...a.log.calls, ...b.log.calls]) {
      const key = `${call.handler} ${call.eventId}`;
      runs.set(key, (runs.get(key) ?? 0) + 1);
    }
    const expected = ids.flatMap((id) => [`ledger ${id}`, `audit-log ${id}`]);
    expect([...runs.keys()].sort()).toEqual([...expected].sort());
    expect([...runs.entries()].filter(([, count]) => count !== 1)).toEqual([]);
    expect(a.log.calls.length).toBeGreaterThan(0);
    expect(b.log.calls.length).toBeGreaterThan(0);
    expect(a.log.calls.length + b.log.calls.length).toBe(2000);

    const { rows } = await t.sql.query(
      `SELECT count(*)::int AS n FROM outbox_event
       WHERE attempts = 1 AND deliveries ?& array['ledger', 'audit-log']`,
    );
    expect(rows[0].n).toBe(1000);
  });

  it('an instance with types delivers only those types and leaves the other type untouched', async () => {
    const only = await instance({ types: ['invoice.paid'] });

    const [paidId, invitedId] = await emit(only, [
      event('invoice.paid', 'inv-1'),
      event('member.invited', 'mem-1'),
    ]);
    // One transaction: every claim that could see the paid event could see the other one too.
    await eventually('the invoice.paid event delivered', async () => {
      return (await row(paidId)).dispatched_at !== null;
    });
    expect((await only.engine.drainOnce()).claimed).toBe(0);

    expect(only.log.calls.map((c) => [c.handler, c.eventId]).sort()).toEqual([
      ['audit-log', paidId],
      ['ledger', paidId],
    ]);
    expect(await row(invitedId)).toMatchObject({
      type: 'member.invited',
      dispatched_at: null,
      dead_at: null,
      lease_expires_at: null,
      attempts: 0,
      deliveries: {},
      last_error: null,
    });
  });

  it('the running engine drains again at once while batches come back full: 35 events in batches of 10', async () => {
    // Only a NOTIFY or a full batch can wake the engine here: the poll and the pause after a
    // short batch are both ten minutes.
    const claim = jest.spyOn(OutboxLeaseStore.prototype, 'claim');
    const running = await instance({
      tuning: { batchSize: 10, pollIntervalMs: 600_000, idleFloorMs: 600_000 },
    });
    await eventually('the first drain at start', () => running.engine.lastDrainAt !== null);

    const ids = await emit(
      running,
      Array.from({ length: 35 }, (_, i) => event('member.invited', `mem-${i}`)),
    );
    await eventually('all 35 events delivered', async () => (await undelivered()) === 0);

    expect(new Set(running.log.calls.map((c) => c.eventId))).toEqual(new Set(ids));
    expect(running.log.calls).toHaveLength(35);
    // Every claim of the loop asked for a batch of 10; the ones that found rows took 10, 10, 10
    // and 5, each started by the one before coming back full, without any other wake. Two
    // claims may be in flight at once, so they may come back in either order.
    expect(claim.mock.calls.every(([options]) => options.limit === 10)).toBe(true);
    const claims = await Promise.all(
      claim.mock.results.map((result) => result.value as ReturnType<OutboxLeaseStore['claim']>),
    );
    const claimed = claims.map((result) => (result.ok ? result.value.length : NaN));
    expect(claimed.filter((n) => n !== 0).sort((a, b) => b - a)).toEqual([10, 10, 10, 5]);
  });
});
