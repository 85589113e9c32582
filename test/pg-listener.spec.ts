import type { Client, ClientConfig } from 'pg';
import { PgListener, type PgListenerOptions } from '@app/outbox/engine/pg.listener';
import type { PgListenerState } from '@app/outbox/engine/pg-listener.types';
import { findFreePort } from './support/free-port';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy';
import { createTestDatabase, type TestDatabase } from './support/test-database';

/**
 * The LISTEN connection against a real PostgreSQL: killed backends, half-open sockets and a
 * server that is not there yet. Faults the server cannot produce on request go through a local
 * TCP proxy. Nothing asserts on elapsed time except the backoff, and only as a ratio of gaps.
 */

const CHANNEL = 'outbox_listener_proof';

let db: TestDatabase;
let sql: Client;
let appNames = 0;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  db = await createTestDatabase();
  sql = await db.connect();
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

afterAll(async () => {
  await db?.close();
});

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls until `condition` holds; the deadline only turns a hang into a readable failure. */
async function waitFor(
  what: string,
  condition: () => boolean | Promise<boolean>,
  deadlineMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** A unique application_name per listener, so a test can find its backend and only its own. */
function nextAppName(): string {
  appNames += 1;
  return `outbox-listener-${appNames}`;
}

/** The test database reached through `port` on 127.0.0.1, URL options kept. */
function urlThrough(port: number): string {
  const url = new URL(db.url);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return url.toString();
}

function databaseAddress(): { host: string; port: number } {
  const url = new URL(db.url);
  return { host: url.hostname, port: Number(url.port || '5432') };
}

async function proxy(...args: Parameters<typeof startTcpProxy>): Promise<TcpProxy> {
  const started = await startTcpProxy(...args);
  cleanups.push(() => started.close());
  return started;
}

interface Harness {
  listener: PgListener;
  appName: string;
  payloads: string[];
  errors: string[];
  /** The listener's state each time onError was called. */
  statesOnError: PgListenerState[];
  /** The listener's state each time onReconnect was called. */
  statesOnReconnect: PgListenerState[];
}

function listener(
  options: Partial<PgListenerOptions> & { connectionString?: string } = {},
  onNotify: (payload: string) => void = () => undefined,
): Harness {
  const appName = nextAppName();
  const { connectionString = db.url, ...rest } = options;
  const client: ClientConfig = { connectionString, application_name: appName };
  const harness: Harness = {
    listener: undefined as unknown as PgListener,
    appName,
    payloads: [],
    errors: [],
    statesOnError: [],
    statesOnReconnect: [],
  };
  harness.listener = new PgListener(
    {
      client,
      channel: CHANNEL,
      connectTimeoutMs: 5_000,
      queryTimeoutMs: 5_000,
      probeIntervalMs: 15_000,
      reconnectMinMs: 250,
      reconnectMaxMs: 15_000,
      ...rest,
    },
    {
      onNotify: (payload) => {
        harness.payloads.push(payload);
        onNotify(payload);
      },
      onReconnect: () => harness.statesOnReconnect.push(harness.listener.state),
      onError: (message) => {
        harness.errors.push(message);
        harness.statesOnError.push(harness.listener.state);
      },
    },
  );
  cleanups.push(() => harness.listener.stop());
  return harness;
}

async function notify(payload: string): Promise<void> {
  await sql.query('SELECT pg_notify($1, $2)', [CHANNEL, payload]);
}

async function received(harness: Harness, payload: string): Promise<void> {
  await waitFor(`NOTIFY ${payload}`, () => harness.payloads.includes(payload));
}

/** Backend pids of the sessions with `appName` on this test's database. */
async function backends(appName: string): Promise<number[]> {
  const { rows } = await sql.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`,
    [appName],
  );
  return rows.map((row) => row.pid);
}

/** The URL's password must never reach the owner's logger. */
function expectNoPassword(messages: string[]): void {
  const password = decodeURIComponent(new URL(db.url).password);
  if (password === '') return;
  for (const message of messages) expect(message).not.toContain(password);
}

describe('PgListener', () => {
  it('1. receives a NOTIFY sent from another connection after start', async () => {
    const harness = listener();
    await harness.listener.start();
    expect(harness.listener.state).toBe('listening');

    await notify('first');
    await received(harness, 'first');

    expect(harness.payloads).toEqual(['first']);
    expect(harness.listener.reconnects).toBe(0);
    expect(harness.statesOnReconnect).toEqual([]);
    expect(harness.errors).toEqual([]);
    expect(await backends(harness.appName)).toHaveLength(1);
  });

  it('2. reconnects after pg_terminate_backend, calls onReconnect once and receives later NOTIFYs', async () => {
    const harness = listener();
    await harness.listener.start();
    const [killed] = await backends(harness.appName);
    expect(killed).toBeDefined();

    await sql.query('SELECT pg_terminate_backend($1)', [killed]);
    await waitFor('the reconnect', () => harness.listener.reconnects === 1);

    expect(harness.listener.state).toBe('listening');
    expect(harness.statesOnError[0]).toBe('reconnecting');
    expect(harness.errors[0]).toMatch(/terminating connection due to administrator command/);
    expect(harness.statesOnReconnect).toEqual(['listening']);
    const now = await backends(harness.appName);
    expect(now).toHaveLength(1);
    expect(now).not.toContain(killed);

    await notify('after-reconnect');
    await received(harness, 'after-reconnect');
    expect(harness.statesOnReconnect).toHaveLength(1);
    expect(harness.listener.reconnects).toBe(1);
    expectNoPassword(harness.errors);
  });

  it('3. detects a half-open connection with the probe, replaces the client and receives later NOTIFYs', async () => {
    const relay = await proxy(databaseAddress());
    const harness = listener({
      connectionString: urlThrough(relay.port),
      probeIntervalMs: 200,
      queryTimeoutMs: 300,
    });
    await harness.listener.start();
    await notify('before-blackhole');
    await received(harness, 'before-blackhole');

    // The old session stays up on the server and the socket stays open: no event will come.
    relay.blackhole();
    await waitFor('the reconnect', () => harness.listener.reconnects === 1);

    expect(harness.listener.state).toBe('listening');
    expect(harness.statesOnReconnect).toEqual(['listening']);
    expect(harness.errors[0]).toMatch(/^probe failed.*Query read timeout/);
    // The listener closed its half-open socket itself, without waiting for the peer.
    expect(relay.connections[0]).toMatchObject({ blackholed: true, clientClosed: true });
    expect(relay.connections[1]).toMatchObject({ blackholed: false, clientClosed: false });

    await notify('after-blackhole');
    await received(harness, 'after-blackhole');
    expect(harness.payloads).toEqual(['before-blackhole', 'after-blackhole']);
    expect(harness.listener.reconnects).toBe(1);
    expect(harness.statesOnReconnect).toHaveLength(1);
  });

  it('4. start() against an unreachable port resolves, retries with growing delays and connects once a server appears', async () => {
    const port = await findFreePort();
    const harness = listener({ connectionString: urlThrough(port) });

    await expect(harness.listener.start()).resolves.toBeUndefined();
    expect(harness.listener.state).toBe('reconnecting');
    expect(harness.errors[0]).toMatch(/^connect or LISTEN failed.*ECONNREFUSED/);

    // A server appears on the port, but closes every connection at first.
    const relay = await proxy(databaseAddress(), { port, mode: 'refuse' });
    await waitFor('three refused attempts', () => relay.connections.length >= 3);
    const [a, b, c] = relay.connections.map((connection) => connection.acceptedAt);
    // Each delay is twice the one before (less up to 10% jitter): the second gap must be longer.
    expect(c - b).toBeGreaterThan(b - a);
    expect(harness.listener.state).toBe('reconnecting');

    relay.setMode('forward');
    await waitFor('LISTEN through the proxy', () => harness.listener.state === 'listening');
    // start() reported failure, so the first LISTEN afterwards is a re-connection for the owner.
    expect(harness.statesOnReconnect).toEqual(['listening']);
    await notify('server-appeared');
    await received(harness, 'server-appeared');

    await harness.listener.stop();
    expect(harness.listener.state).toBe('stopped');
    await waitFor('every proxied socket closed', () =>
      relay.connections.every((connection) => connection.clientClosed),
    );
    expectNoPassword(harness.errors);
  });

  it('5. stop() is idempotent and no notification is delivered after it', async () => {
    const harness = listener();
    await harness.listener.start();
    await notify('before-stop');
    await received(harness, 'before-stop');

    await Promise.all([harness.listener.stop(), harness.listener.stop()]);
    await harness.listener.stop();
    expect(harness.listener.state).toBe('stopped');
    // start() after stop() neither rejects nor connects again.
    await harness.listener.start();
    expect(harness.listener.state).toBe('stopped');
    await waitFor('the session to end', async () => (await backends(harness.appName)).length === 0);

    // A second listener proves the NOTIFY was sent and delivered to whoever still listens.
    const control = await db.connect();
    const controlPayloads: string[] = [];
    control.on('notification', (message) => controlPayloads.push(message.payload ?? ''));
    await control.query(`LISTEN ${control.escapeIdentifier(CHANNEL)}`);
    await notify('after-stop');
    await waitFor('the control listener', () => controlPayloads.includes('after-stop'));

    expect(harness.payloads).toEqual(['before-stop']);
    expect(harness.errors).toEqual([]);
    expect(harness.listener.reconnects).toBe(0);
  });

  it('6. stop() during a first connect that hangs resolves start() and closes the socket', async () => {
    const relay = await proxy(databaseAddress(), { mode: 'hang' });
    const harness = listener({
      connectionString: urlThrough(relay.port),
      connectTimeoutMs: 30_000,
    });

    const started = harness.listener.start();
    expect(harness.listener.state).toBe('connecting');
    await waitFor('the connect to reach the proxy', () => relay.connections.length === 1);

    await harness.listener.stop();
    await expect(started).resolves.toBeUndefined();
    expect(harness.listener.state).toBe('stopped');
    await waitFor('the socket to close', () => relay.connections[0]?.clientClosed === true);
    expect(harness.errors).toEqual([]);
  });

  it('7. a connect that hangs is bounded by connectTimeoutMs and then retried', async () => {
    const relay = await proxy(databaseAddress(), { mode: 'hang' });
    const harness = listener({ connectionString: urlThrough(relay.port), connectTimeoutMs: 300 });

    await harness.listener.start();
    expect(harness.listener.state).toBe('reconnecting');
    expect(harness.errors[0]).toMatch(/^connect or LISTEN failed.*timeout/);

    relay.setMode('forward');
    await waitFor('LISTEN on the retry', () => harness.listener.state === 'listening');
    expect(harness.listener.reconnects).toBe(1);
  });

  it('8. stop() on a half-open connection does not wait for the FIN that never comes', async () => {
    const relay = await proxy(databaseAddress());
    // No probe before stop(): end() would find no active query and wait for the server's FIN.
    const harness = listener({ connectionString: urlThrough(relay.port), queryTimeoutMs: 300 });
    await harness.listener.start();
    relay.blackhole();

    await harness.listener.stop();
    expect(harness.listener.state).toBe('stopped');
    await waitFor('the socket to close', () => relay.connections[0]?.clientClosed === true);
    expect(harness.errors).toEqual([]);
  });

  it('9. a throwing onNotify is reported and the listener keeps delivering', async () => {
    const harness = listener({}, (payload) => {
      if (payload === 'boom') throw new Error('handler failed');
    });
    await harness.listener.start();

    await notify('boom');
    await notify('next');
    await received(harness, 'next');

    expect(harness.payloads).toEqual(['boom', 'next']);
    expect(harness.errors).toEqual(['handler threw: Error: handler failed']);
    expect(harness.listener.state).toBe('listening');
  });
});
