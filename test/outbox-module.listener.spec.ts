import { Injectable, type INestApplication } from '@nestjs/common';
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
import { createOutboxApp, withDefaults, eventually } from './support/outbox-app';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy';
import { eventRow, useTestDatabase } from './support/test-database';

/**
 * The running engine and its LISTEN connection, through the real module: every test uses a
 * ten-minute poll, so an event that gets delivered was woken by a NOTIFY or by the catch-up
 * drain after a reconnect, never by the poll (eventually gives up after 20 s).
 */

const TEN_MINUTES = 600_000;

@Injectable()
class Ledger {
  readonly calls: OutboxEvent[] = [];

  @OnOutboxEvent('ledger', { events: ['invoice.paid'] })
  handle(event: OutboxEvent) {
    this.calls.push(event);
  }
}

const t = useTestDatabase({ truncateEach: ['outbox_event'] });
let pendingState: jest.SpiedFunction<OutboxLeaseStore['nextDue']>;
const cleanups: Array<() => Promise<void>> = [];

beforeEach(() => {
  // Every next-due probe of the engine, so a test can wait until its drain is over.
  pendingState = jest.spyOn(OutboxLeaseStore.prototype, 'nextDue');
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  jest.restoreAllMocks();
});

interface Running {
  app: INestApplication;
  engine: OutboxEngine;
  publisher: OutboxPublisher;
  dataSource: DataSource;
  ledger: Ledger;
}

async function start(outbox: OutboxModuleOptions = {}, url = t.db.url): Promise<Running> {
  const app = await createOutboxApp({
    url,
    outbox: withDefaults(
      { tuning: { pollIntervalMs: TEN_MINUTES }, retention: { enabled: false } },
      outbox,
    ),
    providers: [Ledger],
  });
  cleanups.push(() => app.close());
  const running = {
    app,
    engine: app.get(OutboxEngine),
    publisher: app.get(OutboxPublisher),
    dataSource: app.get(DataSource),
    ledger: app.get(Ledger),
  };
  expect(running.engine.state).toBe('running');
  expect(running.engine.listenerState).toBe('listening');
  return running;
}

/**
 * A proxy to the server for the LISTEN connection, which goes to the server directly, also when
 * the app's connections go through a pooler (see test/support/pooler.ts).
 */
async function proxy(): Promise<TcpProxy> {
  const url = new URL(t.db.directUrl);
  const started = await startTcpProxy({ host: url.hostname, port: Number(url.port || '5432') });
  cleanups.push(() => started.close());
  return started;
}

/** The test database reached through the proxy. */
function urlThrough(relay: TcpProxy): string {
  const url = new URL(t.db.directUrl);
  url.hostname = '127.0.0.1';
  url.port = String(relay.port);
  return url.toString();
}

/**
 * An app whose connections, its LISTEN connection's too, go through a proxy to the server, once
 * its first drain is over, with every claim it sends from then on watched.
 */
async function startThroughProxy(outbox: OutboxModuleOptions) {
  const relay = await proxy();
  const through = urlThrough(relay);
  const running = await start(
    { ...outbox, listen: { ...outbox.listen, connectionString: through } },
    through,
  );
  await untilAsleep('the first drain at start', running.engine, BEFORE_START);
  const claim = jest.spyOn(OutboxLeaseStore.prototype, 'claim');
  /** The claims' results so far, once each has answered. */
  const claims = () =>
    Promise.all(claim.mock.results.map((r) => r.value as ReturnType<OutboxLeaseStore['claim']>));
  return { relay, running, claims };
}

/** Where the engine stood: its last drain and how often it had asked for its next delay. */
interface Mark {
  drain: Date | null;
  pendingStateCalls: number;
}

/** Before the app started: the spy is new in every test. */
const BEFORE_START: Mark = { drain: null, pendingStateCalls: 0 };

function mark(engine: OutboxEngine): Mark {
  return { drain: engine.lastDrainAt, pendingStateCalls: pendingState.mock.calls.length };
}

/**
 * Waits until the engine has finished a drain after `since`, probed the next due time for its
 * next delay and planned its next wake. With nothing due that wake is the ten-minute poll, so
 * from here on only a NOTIFY or a reconnect wakes it.
 */
async function untilAsleep(what: string, engine: OutboxEngine, since: Mark): Promise<void> {
  await eventually(what, () => {
    const last = engine.lastDrainAt;
    return (
      last !== null &&
      last !== since.drain &&
      pendingState.mock.calls.length > since.pendingStateCalls
    );
  });
  // Once the probe has answered, the engine only plans its timer.
  await Promise.allSettled(pendingState.mock.results.map((result) => result.value as unknown));
  await new Promise((resolve) => setImmediate(resolve));
}

const paid = (aggregateId: string): NewOutboxEvent => ({
  type: 'invoice.paid',
  aggregateType: 'invoice',
  aggregateId,
  payload: { amount: 100 },
});

function emit(running: Running, event: NewOutboxEvent): Promise<string> {
  return running.dataSource.transaction((manager) => running.publisher.emit(event, { manager }));
}

function delivered(running: Running, id: string): boolean {
  return running.ledger.calls.some((event) => event.id === id);
}

/** Backend pids of the engine's LISTEN connection on this test's database. */
async function listenerBackends(): Promise<number[]> {
  const { rows } = await t.sql.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE application_name = 'outbox-listener' AND datname = $1`,
    [t.db.name],
  );
  return rows.map((row) => row.pid);
}

const row = (id: string) => eventRow(t.sql, id);

describe('OutboxModule listener', () => {
  it('delivers an event promptly on its NOTIFY although the poll is ten minutes away', async () => {
    const running = await start();
    await untilAsleep('the first drain at start', running.engine, BEFORE_START);

    const id = await emit(running, paid('inv-notify'));
    await eventually('the NOTIFY-woken delivery', () => delivered(running, id));

    expect(running.ledger.calls.map((event) => event.id)).toEqual([id]);
    await eventually('the settle', async () => (await row(id)).dispatched_at !== null);
    expect((await row(id)).attempts).toBe(1);
  });

  it('reconnects after pg_terminate_backend and the catch-up drain delivers an event written while it was down', async () => {
    // The reconnect waits at least 900 ms (1000 less jitter): the event commits well before.
    const running = await start({ listen: { reconnectMinMs: 1000 } });
    await untilAsleep('the first drain at start', running.engine, BEFORE_START);
    const [killed] = await listenerBackends();
    expect(killed).toBeDefined();

    const { rows } = await t.sql.query<{ terminated: boolean }>(
      'SELECT pg_terminate_backend($1) AS terminated',
      [killed],
    );
    expect(rows).toEqual([{ terminated: true }]);
    await eventually('the listener to notice', () => {
      return running.engine.listenerState === 'reconnecting';
    });

    // Its NOTIFY reaches nobody: only the drain after the reconnect can find it.
    const id = await emit(running, paid('inv-missed'));
    expect(running.engine.listenerState).toBe('reconnecting');
    expect(delivered(running, id)).toBe(false);

    await eventually('the catch-up delivery', () => delivered(running, id));
    await eventually('the listener to be back', () => {
      return running.engine.listenerState === 'listening';
    });
    const now = await listenerBackends();
    expect(now).toHaveLength(1);
    expect(now).not.toContain(killed);
    expect(running.ledger.calls.map((event) => event.id)).toEqual([id]);
  });

  it('replaces a half-open LISTEN connection found by the probe and delivers a later event on its NOTIFY', async () => {
    const relay = await proxy();
    const running = await start({
      listen: { connectionString: urlThrough(relay), probeIntervalMs: 200, queryTimeoutMs: 300 },
    });
    await untilAsleep('the first drain at start', running.engine, BEFORE_START);
    expect(relay.connections).toHaveLength(1);
    const before = mark(running.engine);

    relay.blackhole();
    await eventually('the probe to give up on the half-open connection', () => {
      return relay.connections[0].clientClosed;
    });
    await eventually('a new LISTEN connection through the proxy', () => {
      return relay.connections.length === 2 && running.engine.listenerState === 'listening';
    });
    expect(relay.connections[1].blackholed).toBe(false);
    // The reconnect wakes a catch-up drain; once it is over, only a NOTIFY on the new connection
    // can wake the engine.
    await untilAsleep('the catch-up drain after the reconnect', running.engine, before);

    const id = await emit(running, paid('inv-after-half-open'));
    await eventually('the delivery woken through the new connection', () => {
      return delivered(running, id);
    });
    expect(running.ledger.calls.map((event) => event.id)).toEqual([id]);
    expect(relay.connections).toHaveLength(2);
  });

  it('listens again as soon as claims come back after the database was away, not after its backoff', async () => {
    // Waiting out its backoff, the listener would come back a minute after the outage, far past
    // the 20 s that eventually allows; failed claims are tried again every 100 ms.
    const { relay, running, claims } = await startThroughProxy({
      listen: { reconnectMinMs: 60_000, reconnectMaxMs: 60_000 },
      tuning: { failedDrainRetryMs: 100 },
    });
    const failedClaims = async () => (await claims()).filter((result) => !result.ok).length;

    // The server goes away: open connections are reset and new ones refused.
    relay.setMode('refuse');
    relay.reset();
    await eventually('the listener to notice', () => {
      return running.engine.listenerState === 'reconnecting';
    });
    running.engine.wake();
    await eventually('claims to fail and be tried again', async () => (await failedClaims()) >= 2);

    relay.setMode('forward');
    await eventually('the listener to be back', () => {
      return running.engine.listenerState === 'listening';
    });
    const id = await emit(running, paid('inv-after-outage'));
    await eventually('the delivery woken by its NOTIFY', () => delivered(running, id));
    expect(running.ledger.calls.map((event) => event.id)).toEqual([id]);
  });

  it('leaves a listener whose own server is away to its backoff while claims keep succeeding', async () => {
    const relay = await proxy();
    const running = await start({
      listen: {
        connectionString: urlThrough(relay),
        reconnectMinMs: 60_000,
        reconnectMaxMs: 60_000,
      },
    });
    await untilAsleep('the first drain at start', running.engine, BEFORE_START);

    // Only the LISTEN connection's server goes away; the app's own connections still answer.
    relay.setMode('refuse');
    relay.reset();
    await eventually('the listener to notice', () => {
      return running.engine.listenerState === 'reconnecting';
    });
    const attempts = relay.connections.length;
    for (let i = 0; i < 3; i++) {
      const before = mark(running.engine);
      running.engine.wake();
      await untilAsleep(`claim ${i + 1}`, running.engine, before);
    }
    expect(relay.connections).toHaveLength(attempts);
    expect(running.engine.listenerState).toBe('reconnecting');
  });

  it('replaces LISTEN and the pooled connections at once when a statement finds the server gone behind a moved address', async () => {
    // Its own probe and a probe's timeout are ten minutes away: only a statement that finds the
    // server gone can have it replaced sooner.
    const { relay, running, claims } = await startThroughProxy({
      listen: { probeIntervalMs: TEN_MINUTES, queryTimeoutMs: TEN_MINUTES },
      tuning: { statementTimeoutMs: 300, failedDrainRetryMs: 100 },
    });
    const [halfOpen] = await listenerBackends();

    // Every open connection goes half-open, as when a virtual IP moves; new ones go through.
    relay.blackhole();
    const halfOpenLinks = relay.connections.filter((link) => link.blackholed);
    expect(halfOpenLinks.length).toBeGreaterThan(1);
    running.engine.wake();
    await eventually('a new LISTEN connection', async () => {
      const backends = await listenerBackends();
      return (
        backends.some((pid) => pid !== halfOpen) && running.engine.listenerState === 'listening'
      );
    });
    // The pool's other connections reach the same lost server: none is used again, so only the
    // first claim waited out its deadline on one.
    await eventually('every half-open connection given up by the app', () =>
      halfOpenLinks.every((link) => link.clientClosed),
    );
    expect((await claims()).filter((result) => !result.ok)).toHaveLength(1);

    // Emitted by another app straight to the server: its NOTIFY can only reach the new connection.
    const producer = await createOutboxApp({ url: t.db.url, outbox: { autoStart: false } });
    cleanups.push(() => producer.close());
    const id = await producer
      .get(DataSource)
      .transaction((manager) => producer.get(OutboxPublisher).emit(paid('inv-moved'), { manager }));
    await eventually('the delivery woken by its NOTIFY', () => delivered(running, id));
  });

  it('a LISTEN probe that gets no answer retires the pooled connections too: no claim after it waits on a half-open one', async () => {
    const { relay, running, claims } = await startThroughProxy({
      listen: { probeIntervalMs: 200, queryTimeoutMs: 300 },
      tuning: { statementTimeoutMs: 2000 },
    });
    // Every open connection goes half-open, as when a virtual IP moves; new ones go through.
    relay.blackhole();
    const halfOpenLinks = relay.connections.filter((link) => link.blackholed);
    expect(halfOpenLinks.length).toBeGreaterThan(1);
    await eventually('the probe to replace LISTEN, and the catch-up claim after it', async () => {
      return (await claims()).length > 0 && running.engine.listenerState === 'listening';
    });

    const producer = await createOutboxApp({ url: t.db.url, outbox: { autoStart: false } });
    cleanups.push(() => producer.close());
    const id = await producer
      .get(DataSource)
      .transaction((manager) =>
        producer.get(OutboxPublisher).emit(paid('inv-probed'), { manager }),
      );
    await eventually('the delivery woken by its NOTIFY', () => delivered(running, id));
    expect((await claims()).filter((result) => !result.ok)).toEqual([]);
    expect(halfOpenLinks.every((link) => link.clientClosed)).toBe(true);
  });
});
