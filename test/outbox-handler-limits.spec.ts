import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { DataSource } from 'typeorm';
import { OutboxPublisher, type NewOutboxEvent } from '@app/outbox';
import { createOutboxApp, eventually, useTestLeftovers } from './support/outbox-app';
import { useTestDatabase } from './support/test-database';
import type { LimitedWorkerConfig } from './support/limited-worker';

/**
 * Limits of a handler held across processes: three worker processes (test/support/
 * limited-worker.ts), each with its own engine and pool, run one limited handler against one
 * database. What each run did is read back by the database clock: never more than the limit in
 * flight or in any window, every event delivered once, and events held back keep their attempt.
 */

const ROOT = resolve(__dirname, '..');
const WORKERS = 3;

const t = useTestDatabase();
const { closeAfterTest } = useTestLeftovers();
const children: ChildProcess[] = [];

beforeAll(async () => {
  await t.sql.query(`
    CREATE TABLE limit_run (
      id bigserial PRIMARY KEY, event_id uuid NOT NULL, partition_key text NOT NULL,
      pid integer NOT NULL, attempt integer NOT NULL,
      started_at timestamptz NOT NULL, ended_at timestamptz);
    -- Every admission of a rate, as the limit logged it (its own clock, read under its lock).
    CREATE TABLE limit_admission (at timestamptz NOT NULL);
    CREATE FUNCTION log_admission() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF cardinality(NEW.starts) > 0 AND (cardinality(OLD.starts) = 0
          OR NEW.starts[cardinality(NEW.starts)] > OLD.starts[cardinality(OLD.starts)]) THEN
        INSERT INTO limit_admission (at) VALUES (NEW.starts[cardinality(NEW.starts)]);
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER log_admission AFTER UPDATE ON outbox_handler_limit
      FOR EACH ROW EXECUTE FUNCTION log_admission();`);
});

beforeEach(async () => {
  await t.sql.query(
    'TRUNCATE outbox_event, outbox_handler_limit, limit_run, limit_admission RESTART IDENTITY',
  );
});

afterEach(async () => {
  await Promise.all(children.splice(0).map(stop));
});

/** Starts a worker process and resolves once its engine runs. */
async function startWorker(config: Omit<LimitedWorkerConfig, 'url' | 'directUrl'>) {
  const child = spawn(
    process.execPath,
    [
      '-r',
      'ts-node/register/transpile-only',
      '-r',
      'tsconfig-paths/register',
      'test/support/limited-worker.ts',
    ],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        LIMITED_WORKER: JSON.stringify({ ...config, url: t.db.url, directUrl: t.db.directUrl }),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  let output = '';
  await new Promise<void>((ready, failed) => {
    const timer = setTimeout(() => failed(new Error(`worker not ready: ${output}`)), 90_000);
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('ready')) {
        clearTimeout(timer);
        ready();
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code) => {
      clearTimeout(timer);
      failed(new Error(`worker exited (${code}): ${output}`));
    });
  });
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((done) => {
    const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('exit', () => {
      clearTimeout(kill);
      done();
    });
    child.kill('SIGTERM');
  });
}

async function startWorkers(config: Omit<LimitedWorkerConfig, 'url' | 'directUrl'>) {
  await Promise.all(Array.from({ length: WORKERS }, () => startWorker(config)));
}

/** Emits `count` events of `limited.call`, per organization, from an app that runs nothing. */
async function emit(count: number, organizations: readonly string[] = ['org-A']) {
  const app = closeAfterTest(
    await createOutboxApp({ url: t.db.url, outbox: { autoStart: false } }),
  );
  const events: NewOutboxEvent[] = [];
  for (let i = 0; i < count; i++) {
    for (const organizationId of organizations) {
      events.push({
        type: 'limited.call',
        aggregateType: 'call',
        aggregateId: `${organizationId}-${i}`,
        organizationId,
        payload: { i },
      });
    }
  }
  await app
    .get(DataSource)
    .transaction((manager) => app.get(OutboxPublisher).emit(events, { manager }));
  return events.length;
}

async function allDelivered(count: number): Promise<void> {
  await eventually(`${count} events delivered`, async () => {
    const { rows } = await t.sql.query(
      'SELECT count(*)::int AS n FROM outbox_event WHERE dispatched_at IS NOT NULL',
    );
    return rows[0].n === count;
  });
}

/** Each event ran once, on its first attempt, never failed, and was delivered. */
async function expectEachDeliveredOnceOnItsFirstAttempt(count: number): Promise<void> {
  const runs = await t.sql.query(
    'SELECT count(*)::int AS n, count(DISTINCT event_id)::int AS events, max(attempt) AS attempt FROM limit_run',
  );
  expect(runs.rows[0]).toEqual({ n: count, events: count, attempt: 1 });
  const events = await t.sql.query(`
    SELECT count(*)::int AS n FROM outbox_event
    WHERE attempts = 1 AND failures = '{}' AND last_error IS NULL AND dispatched_at IS NOT NULL`);
  expect(events.rows[0].n).toBe(count);
}

/** Most runs in flight at one instant, from each run's start and end (database clock). */
async function mostInFlight(partition?: string): Promise<number> {
  const { rows } = await t.sql.query(
    `SELECT max(n)::int AS most FROM (
       SELECT sum(delta) OVER (ORDER BY at, delta ROWS UNBOUNDED PRECEDING) AS n, at, delta
       FROM (SELECT started_at AS at, 1 AS delta FROM limit_run
             WHERE $1::text IS NULL OR partition_key = $1
             UNION ALL
             SELECT ended_at, -1 FROM limit_run WHERE $1::text IS NULL OR partition_key = $1) AS e
     ) AS running WHERE delta = 1`,
    [partition ?? null],
  );
  return rows[0].most;
}

async function heldSoFar(): Promise<number> {
  const { rows } = await t.sql.query(
    'SELECT coalesce(sum(held), 0)::int AS held FROM outbox_handler_limit',
  );
  return rows[0].held;
}

describe('handler limits across three processes', () => {
  it('never has more than maxConcurrent runs in flight, and held events keep their attempt', async () => {
    await startWorkers({ limit: { maxConcurrent: 3 }, sleepMs: 100, concurrency: 10 });
    const count = await emit(30);
    await allDelivered(count);
    await expectEachDeliveredOnceOnItsFirstAttempt(count);
    expect(await mostInFlight()).toBe(3);
    expect(await heldSoFar()).toBeGreaterThan(0);
  });

  it('never starts more than rate.limit runs in any window of rate.perMs', async () => {
    await startWorkers({
      limit: { rate: { limit: 10, perMs: 1000 } },
      sleepMs: 5,
      concurrency: 20,
    });
    const count = await emit(35);
    await allDelivered(count);
    await expectEachDeliveredOnceOnItsFirstAttempt(count);
    const { rows } = await t.sql.query<{ ms: number }>(
      `SELECT extract(epoch FROM at) * 1000 AS ms FROM limit_admission ORDER BY at`,
    );
    const admitted = rows.map((row) => Number(row.ms));
    expect(admitted).toHaveLength(count);
    // Any 11 admissions in a row span at least a window: no window holds 11.
    const spans = admitted.slice(10).map((at, i) => at - admitted[i]);
    expect(Math.min(...spans)).toBeGreaterThanOrEqual(1000);
    expect(await heldSoFar()).toBeGreaterThan(0);
  });

  it('counts a limit per partition with limitPerPartition', async () => {
    await startWorkers({
      limit: { maxConcurrent: 1, limitPerPartition: true },
      sleepMs: 100,
      concurrency: 10,
    });
    const count = await emit(8, ['org-A', 'org-B']);
    await allDelivered(count);
    await expectEachDeliveredOnceOnItsFirstAttempt(count);
    expect(await mostInFlight('org-A')).toBe(1);
    expect(await mostInFlight('org-B')).toBe(1);
    expect(await mostInFlight()).toBe(2);
  });
});
