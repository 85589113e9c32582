import { access, mkdtemp, rm } from 'node:fs/promises';
import { createServer as createHttpServer, type Server, type ServerResponse } from 'node:http';
import {
  createServer as createTcpServer,
  type AddressInfo,
  type Server as TcpServer,
} from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import {
  gone,
  isAlive,
  livePostmaster,
  NpmStart,
  postCreated,
  processGroupOf,
  sleep,
  stopPostgresIn,
} from '../support/app-process';
import { findFreePort } from '../support/free-port';
import { webhookDeliveries } from '../support/webhook-deliveries';

/**
 * `npm start` without DATABASE_URL, as users run it: the app on its embedded PostgreSQL, in a
 * temporary data directory. A terminal's Ctrl-C goes to the whole foreground process group;
 * the database must outlive the app's drain, so a webhook POST in flight is recorded as
 * delivered and not sent again after a restart.
 */

const GRACE_MS = 8000;
/** Long enough for the sender, polling every 50 ms here, to resend a delivery it thinks due. */
const NO_RESEND_WINDOW_MS = 3000;
/**
 * Bounds each POST; a claim's lease is this plus 5 s, after which a delivery whose settle was
 * lost is sent again. Short, so that the test can wait that out; long enough to hold a POST
 * over the Ctrl-C.
 */
const WEBHOOK_TIMEOUT_MS = 8000;
/** Each of these tests boots the app twice or more; generous for a loaded machine. */
const BOOTS_TIMEOUT_MS = 120_000;

let root: string;
let dataDir: string;
let pgPort: number;
let receiver: HoldingReceiver;
const apps: NpmStart[] = [];

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'outbox-embedded-start-'));
  dataDir = join(root, 'postgres');
  pgPort = await findFreePort();
  receiver = await HoldingReceiver.start();
});

afterAll(async () => {
  apps.forEach((app) => app.kill());
  await Promise.all(apps.map((app) => app.exited));
  await stopPostgresIn(dataDir);
  receiver?.releaseAll();
  await receiver?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

/** Accepts webhook POSTs, records each one's webhook-id, and holds them open while told to. */
class HoldingReceiver {
  readonly webhookIds: string[] = [];
  holding = true;
  private readonly held: ServerResponse[] = [];

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<HoldingReceiver> {
    const server = createHttpServer();
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
    const receiver = new HoldingReceiver(server, url);
    server.on('request', (req, res) => {
      req.resume();
      req.on('end', () => {
        receiver.webhookIds.push(String(req.headers['webhook-id']));
        if (receiver.holding) receiver.held.push(res);
        else res.writeHead(204).end();
      });
    });
    return receiver;
  }

  get heldCount(): number {
    return this.held.length;
  }

  releaseAll(): void {
    this.holding = false;
    this.held.splice(0).forEach((res) => res.writeHead(204).end());
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((done) => this.server.close(() => done()));
  }
}

function npmStart(env: Record<string, string>): NpmStart {
  const app = NpmStart.run({
    EMBEDDED_PG_DATA_DIR: dataDir,
    EMBEDDED_PG_PORT: String(pgPort),
    OUTBOX_SHUTDOWN_GRACE_MS: String(GRACE_MS),
    WEBHOOK_TIMEOUT_MS: String(WEBHOOK_TIMEOUT_MS),
    ...env,
  });
  apps.push(app);
  return app;
}

async function startListening(): Promise<{ app: NpmStart; base: string }> {
  const port = await findFreePort();
  const base = `http://127.0.0.1:${port}`;
  const app = npmStart({ PORT: String(port) });
  await app.waitFor('/health to answer 200', async () => (await status(`${base}/health`)) === 200);
  return { app, base };
}

async function status(url: string): Promise<number | undefined> {
  try {
    return (await fetch(url)).status;
  } catch {
    return undefined; // not listening (yet, or any more)
  }
}

async function embeddedSql<T>(query: (sql: Client) => Promise<T>): Promise<T> {
  const sql = new Client({
    connectionString: `postgres://postgres:outbox-local@127.0.0.1:${pgPort}/outbox_reference`,
  });
  await sql.connect();
  try {
    return await query(sql);
  } finally {
    await sql.end();
  }
}

async function listeningOn(port: number): Promise<TcpServer> {
  const server = createTcpServer();
  await new Promise<void>((done) => server.listen(port, '127.0.0.1', done));
  return server;
}

describe('npm start on the embedded PostgreSQL', () => {
  it(
    'on Ctrl-C, finishes the in-flight webhook before PostgreSQL stops, and a restart does not send it again',
    async () => {
      const { app: first, base } = await startListening();
      const postmaster = await livePostmaster(dataDir);
      expect(postmaster).toBeDefined();
      const group = await processGroupOf(postmaster!);
      if (group !== undefined) expect(group).not.toBe(first.pid);

      // A second npm start on the same data directory is refused, and leaves the first alone.
      const second = npmStart({ PORT: String(await findFreePort()) });
      const refused = await second.waitForExit();
      expect(refused.code).not.toBe(0);
      expect(second.output).toContain(`the data directory ${dataDir} is in use`);
      expect(second.output).not.toContain('undefined');
      expect(await isAlive(postmaster!)).toBe(true);

      // No OPERATOR_TOKEN was set: npm start made one and the walkthrough shows it.
      await first.waitFor('the walkthrough', () => first.output.includes('Try it'));
      const token = /^ {2}export OPERATOR_TOKEN=([A-Za-z0-9_-]{43})$/m.exec(first.output)?.[1];
      expect(token).toBeDefined();
      const org = await postCreated(
        base,
        '/organizations',
        { name: 'Acme', adminEmail: 'ada@acme.test' },
        { authorization: `Bearer ${token}` },
      );
      const key = { authorization: `Bearer ${org.apiKey}` };
      await postCreated(
        base,
        `/organizations/${org.id}/webhooks`,
        { url: receiver.url, events: ['member.invited'] },
        key,
      );
      const invite = await postCreated(
        base,
        `/organizations/${org.id}/members`,
        { email: 'bob@acme.test', role: 'member' },
        key,
      );
      await first.waitFor('the webhook POST to be in flight', () => receiver.heldCount === 1);
      const webhookId = receiver.webhookIds[0];

      first.signalGroup('SIGINT');
      await first.waitFor('the app to start stopping', () =>
        first.output.includes('SIGINT: finishing in-flight work'),
      );
      // The POST is still open, so the app and its database must both still be there.
      await sleep(500);
      expect(first.exit).toBeUndefined();
      expect(await isAlive(postmaster!)).toBe(true);
      receiver.releaseAll();

      expect(await first.waitForExit()).toEqual({ code: 0, signal: null });
      expect(first.output).toContain('Embedded PostgreSQL stopped');
      expect(first.output).not.toMatch(/ECONNREFUSED|Connection terminated/);
      expect(await gone(postmaster!)).toBe(true);

      const { app: restarted } = await startListening();
      const rows = await embeddedSql((sql) => webhookDeliveries(sql, { eventId: invite.eventId }));
      // Had the settle been lost, the row would still be leased, and sent again once the lease
      // ends: wait past that, and a few polls in any case.
      const leaseEnd: Date | null = rows[0]?.lease_expires_at ?? null;
      const until = Math.max(Date.now(), leaseEnd?.getTime() ?? 0) + NO_RESEND_WINDOW_MS;
      while (Date.now() < until && receiver.webhookIds.length === 1) await sleep(100);
      expect(receiver.webhookIds).toEqual([webhookId]);

      expect(rows).toHaveLength(1);
      expect(rows[0].id).toBe(webhookId);
      expect(rows[0].delivered_at).toBeInstanceOf(Date);
      expect(rows[0].attempts).toBe(1);

      restarted.signalGroup('SIGINT');
      expect(await restarted.waitForExit()).toEqual({ code: 0, signal: null });
      expect(await livePostmaster(dataDir)).toBeUndefined();
    },
    BOOTS_TIMEOUT_MS,
  );

  it(
    'after the app is killed outright, the next npm start stops the PostgreSQL it left and starts afresh',
    async () => {
      const { app: killed } = await startListening();
      const orphan = await livePostmaster(dataDir);
      killed.kill();
      await killed.waitForExit();
      expect(orphan).toBeDefined();
      expect(await isAlive(orphan!)).toBe(true);

      const { app: next } = await startListening();
      expect(next.output).toContain(
        `A PostgreSQL (pid ${orphan}, port ${pgPort}) is still running`,
      );
      expect(await gone(orphan!)).toBe(true);

      next.signalGroup('SIGINT');
      expect(await next.waitForExit()).toEqual({ code: 0, signal: null });
      expect(await livePostmaster(dataDir)).toBeUndefined();
    },
    BOOTS_TIMEOUT_MS,
  );

  it('names a busy port, HTTP or embedded PostgreSQL, and the variable that moves it', async () => {
    const [httpPort, pgBusyPort] = [await findFreePort(), await findFreePort()];
    const taken = [await listeningOn(httpPort), await listeningOn(pgBusyPort)];
    const freshDir = join(root, 'never-initialised');
    try {
      const [http, embedded] = [
        npmStart({ PORT: String(httpPort) }),
        npmStart({
          PORT: String(await findFreePort()),
          EMBEDDED_PG_PORT: String(pgBusyPort),
          EMBEDDED_PG_DATA_DIR: freshDir,
        }),
      ];
      const exits = await Promise.all([http.waitForExit(), embedded.waitForExit()]);
      expect(exits.map((exit) => exit.code)).toEqual([1, 1]);

      expect(http.output).toContain(
        `port ${httpPort} on 127.0.0.1 is already in use (wanted by the HTTP server); set PORT=`,
      );
      // Found before the database would start.
      expect(http.output).not.toContain('starting an embedded PostgreSQL');

      expect(embedded.output).toContain(
        `port ${pgBusyPort} on 127.0.0.1 is already in use (wanted by the embedded PostgreSQL); ` +
          'set EMBEDDED_PG_PORT=',
      );
      await expect(access(join(freshDir, 'PG_VERSION'))).rejects.toThrow();

      for (const app of [http, embedded]) expect(app.output).not.toContain('undefined');
    } finally {
      await Promise.all(taken.map((server) => new Promise((done) => server.close(done))));
    }
  });
});
