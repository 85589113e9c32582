import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import type { Client } from 'pg';
import { createTestDatabase, type TestDatabase } from '../support/test-database';
import { findFreePort } from '../support/free-port';
import { postCreated } from '../support/app-process';
import { eventually } from '../support/outbox-app';
import { webhookDeliveries } from '../support/webhook-deliveries';

/**
 * The reference app as users run it: a real child process started by main.ts, stopped with
 * SIGTERM in the middle of a webhook POST. Readiness must go down at once, the in-flight work
 * must finish, and the process must exit within the shutdown grace.
 */

const ROOT = resolve(__dirname, '../..');
const GRACE_MS = 8000;
const OPERATOR_TOKEN = `operator-${randomBytes(24).toString('base64url')}`;

let db: TestDatabase;
let sql: Client;
let child: ChildProcess | undefined;
let receiver: Server | undefined;
const held: ServerResponse[] = [];
const output: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  sql = await db.connect();
});

afterAll(async () => {
  held.splice(0).forEach((res) => res.end());
  child?.kill('SIGKILL');
  await new Promise<void>((done) => (receiver ? receiver.close(() => done()) : done()));
  await db?.close();
});

/** Accepts webhook POSTs and holds each one open until the test answers it. */
async function startHoldingReceiver(): Promise<string> {
  receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => held.push(res));
  });
  await new Promise<void>((done) => receiver!.listen(0, '127.0.0.1', done));
  return `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
}

function startApp(port: number): ChildProcess {
  const app = spawn(
    process.execPath,
    [
      '-r',
      'ts-node/register/transpile-only',
      '-r',
      'tsconfig-paths/register',
      'apps/reference/src/main.ts',
    ],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL: db.url,
        OPERATOR_TOKEN,
        PORT: String(port),
        OUTBOX_SHUTDOWN_GRACE_MS: String(GRACE_MS),
        WEBHOOK_TIMEOUT_MS: '30000',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  app.stdout.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  app.stderr.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  return app;
}

async function health(base: string): Promise<{ status: number; body: any } | undefined> {
  try {
    const res = await fetch(`${base}/health`);
    return { status: res.status, body: await res.json() };
  } catch {
    return undefined; // not listening (yet, or any more)
  }
}

describe('reference app process', () => {
  it('answers /health up, reports down after SIGTERM, finishes its in-flight webhook and exits within the grace', async () => {
    const hookUrl = await startHoldingReceiver();
    const port = await findFreePort();
    const base = `http://127.0.0.1:${port}`;
    child = startApp(port);
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
      child!.once('exit', (code, signal) => done({ code, signal })),
    );

    await eventually('the app answers /health', async () => (await health(base))?.status === 200);
    const up = await health(base);
    expect(up!.body.info.outbox).toMatchObject({
      status: 'up',
      state: 'running',
      listener: 'listening',
    });
    expect(up!.body.info.database).toEqual({ status: 'up' });
    expect(output.join('')).toContain(`Reference app listening on ${base}`);

    // A token the user set is theirs: the walkthrough does not print it.
    expect(output.join('')).not.toContain(OPERATOR_TOKEN);
    const org = await postCreated(
      base,
      '/organizations',
      { name: 'Acme', adminEmail: 'ada@acme.test' },
      { authorization: `Bearer ${OPERATOR_TOKEN}` },
    );
    const key = { authorization: `Bearer ${org.apiKey}` };
    await postCreated(
      base,
      `/organizations/${org.id}/webhooks`,
      { url: hookUrl, events: ['member.invited'] },
      key,
    );
    const invite = await postCreated(
      base,
      `/organizations/${org.id}/members`,
      { email: 'bob@acme.test', role: 'member' },
      key,
    );
    await eventually('the webhook POST is in flight', () => held.length === 1);

    const signalledAt = Date.now();
    child.kill('SIGTERM');
    let down: { status: number; body: any } | undefined;
    await eventually('readiness reports down while shutting down', async () => {
      const res = await health(base);
      // A probe that times out on a loaded machine is also a 503; this waits for the one that
      // reports the engine's shutdown.
      const state: unknown = res?.body?.error?.outbox?.state;
      if (res?.status === 503 && (state === 'stopping' || state === 'stopped')) down = res;
      return down !== undefined;
    });
    expect(['stopping', 'stopped']).toContain(down!.body.error.outbox.state);
    expect(down!.body.error.outbox.status).toBe('down');

    // The process is still there, waiting for the POST it started.
    expect(child.exitCode).toBeNull();
    held.splice(0).forEach((res) => res.writeHead(204).end());
    const exit = await exited;
    const shutdownMs = Date.now() - signalledAt;

    // Nest re-raises the signal once its shutdown hooks are done.
    expect(exit.code === 0 || exit.signal === 'SIGTERM').toBe(true);
    expect(shutdownMs).toBeLessThan(GRACE_MS + 5000);
    const rows = await webhookDeliveries(sql, { eventId: invite.eventId });
    expect(rows).toHaveLength(1);
    expect(rows[0].delivered_at).toBeInstanceOf(Date);
    expect(rows[0].attempts).toBe(1);
  });
});
