import { Controller, Get, Injectable, type INestApplication } from '@nestjs/common';
import { ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import request from 'supertest';
import {
  OnOutboxEvent,
  OUTBOX_RETENTION_JOB,
  OutboxEngine,
  OutboxHealthIndicator,
  type OutboxModuleOptions,
} from '@app/outbox';
import { useTestDatabase } from './support/test-database';
import { createOutboxApp, deferred, emitCommitted, eventually } from './support/outbox-app';
import { memberInvited } from './support/events';
import { holdHorizon } from './support/horizon';

/** Readiness over real HTTP (Terminus), and the retention sweep on its schedule. */

const MAX_LAG_MS = 60_000;
/** What the /health endpoint passes to the indicator; a test may change it. */
const probe: { maxLagMs: number; timeoutMs?: number } = { maxLagMs: MAX_LAG_MS };

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly outboxHealth: OutboxHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([
      () =>
        this.outboxHealth.isHealthy('outbox', {
          maxLagMs: probe.maxLagMs,
          timeoutMs: probe.timeoutMs,
        }),
    ]);
  }
}

/** A handler a test can hold open; it delivers at once otherwise. */
let hold: Promise<void> | undefined;
let handled = 0;

@Injectable()
class Mailer {
  @OnOutboxEvent('send-invitation', { events: ['member.invited'] })
  async handle() {
    handled++;
    await hold;
  }
}

const t = useTestDatabase({ truncateEach: ['outbox_event'] });

beforeEach(() => {
  probe.maxLagMs = MAX_LAG_MS;
  probe.timeoutMs = undefined;
  hold = undefined;
  handled = 0;
});

async function startHealthApp(outbox: OutboxModuleOptions = {}): Promise<INestApplication> {
  const app = await createOutboxApp({
    url: t.db.url,
    outbox: { retention: { enabled: false }, ...outbox },
    providers: [Mailer],
    controllers: [HealthController],
    imports: [TerminusModule.forRoot({ logger: false })],
  });
  await app.listen(0);
  return app;
}

/** Rows written straight to the table: no NOTIFY, so the running engine does not wake. */
async function insert(columns: Record<string, string>): Promise<string> {
  const names = Object.keys(columns);
  const { rows } = await t.sql.query(
    `INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload${names
      .map((name) => `, ${name}`)
      .join('')})
     VALUES (gen_random_uuid(), 'member.invited', 'member', 'm-1', '{}'${names
       .map((name) => `, ${columns[name]}`)
       .join('')})
     RETURNING id`,
  );
  return rows[0].id;
}

const pendingLater = () => insert({ next_attempt_at: `now() + interval '1 hour'` });
const dead = () => insert({ attempts: '3', dead_at: 'now()', last_error: `'gone'` });
const delivered = (at: string) => insert({ attempts: '1', dispatched_at: at });

async function ids(): Promise<string[]> {
  const { rows } = await t.sql.query('SELECT id FROM outbox_event ORDER BY id');
  return rows.map((r) => r.id);
}

describe('OutboxHealthIndicator over HTTP', () => {
  let app: INestApplication;
  let engine: OutboxEngine;

  beforeAll(async () => {
    app = await startHealthApp();
    engine = app.get(OutboxEngine);
    await eventually(
      'the engine has drained once and listens',
      () => engine.lastDrainAt !== null && engine.listenerState === 'listening',
    );
  });

  afterAll(async () => {
    await app?.close();
  });

  it('is up (200) with state, listener, lag, counts by state that match the table, and the last drain time', async () => {
    await pendingLater();
    await pendingLater();
    await dead();
    await delivered('now()');

    const res = await request(app.getHttpServer()).get('/health');

    expect(res.status).toBe(200);
    expect(res.body.status).toBe('ok');
    const outbox = res.body.info.outbox;
    expect(outbox).toEqual({
      status: 'up',
      state: 'running',
      listener: 'listening',
      lagMs: 0,
      due: 0,
      retrying: 2,
      inFlight: 0,
      expiredLeases: 0,
      parked: 0,
      dead: 1,
      blockedKeys: 0,
      orderedWaitMs: null,
      countLimit: 1000,
      // Whatever else runs on the database may hold the horizon for a moment.
      horizon: expect.objectContaining({ deadTuples: expect.any(Number) }),
      slots: { size: 20, busy: 0, overdue: 0 },
      settleFailure: null,
      lastDrainAt: expect.any(String),
    });
    expect(new Date(outbox.lastDrainAt).getTime()).toBe(engine.lastDrainAt?.getTime());
  });

  it('stays up (200) for a poison event resting in backoff, however old it is: backoff is not lag', async () => {
    await insert({
      occurred_at: `now() - interval '10 minutes'`,
      attempts: '7',
      next_attempt_at: `now() + interval '1 hour'`,
      last_error: `'downstream said 500'`,
    });

    const res = await request(app.getHttpServer()).get('/health');

    expect(res.status).toBe(200);
    expect(res.body.info.outbox).toMatchObject({ status: 'up', lagMs: 0, due: 0, retrying: 1 });
  });

  it('stays up (200) while a long transaction holds the xmin horizon, and says how long it has', async () => {
    const horizon = await holdHorizon(() => t.db.connect());
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));

      const res = await request(app.getHttpServer()).get('/health');

      expect(res.status).toBe(200);
      expect(res.body.info.outbox.status).toBe('up');
      expect(res.body.info.outbox.horizon.heldMs).toBeGreaterThanOrEqual(300);
    } finally {
      await horizon.release();
    }
  });

  it('is down (503) with a message naming the lag when the oldest due event waited longer than maxLagMs', async () => {
    await insert({
      occurred_at: `now() - interval '1 hour'`,
      next_attempt_at: `now() - interval '10 minutes'`,
    });
    await pendingLater();

    const res = await request(app.getHttpServer()).get('/health');

    expect(res.status).toBe(503);
    expect(res.body.status).toBe('error');
    const outbox = res.body.error.outbox;
    expect(outbox).toMatchObject({
      status: 'down',
      state: 'running',
      due: 1,
      retrying: 1,
      dead: 0,
    });
    expect(outbox.lagMs).toBeGreaterThanOrEqual(10 * 60_000);
    expect(outbox.lagMs).toBeLessThan(11 * 60_000);
    expect(outbox.message).toBe(
      `oldest due event waited ${outbox.lagMs} ms (max ${MAX_LAG_MS} ms)`,
    );
  });

  it('is down (503) with the store error, and never throws, when its state query fails', async () => {
    await t.sql.query('ALTER TABLE outbox_event RENAME TO outbox_event_away');
    try {
      const res = await request(app.getHttpServer()).get('/health');
      expect(res.status).toBe(503);
      expect(res.body.error.outbox).toEqual({
        status: 'down',
        state: 'running',
        listener: 'listening',
        lastDrainAt: expect.any(String),
        message: 'Outbox pendingState failed: relation "outbox_event" does not exist',
      });

      // Called directly, it resolves with the down result rather than rejecting.
      await expect(
        app.get(OutboxHealthIndicator).isHealthy('outbox', { maxLagMs: MAX_LAG_MS }),
      ).resolves.toEqual({
        outbox: expect.objectContaining({
          status: 'down',
          message: expect.stringContaining('does not exist'),
        }),
      });
    } finally {
      await t.sql.query('ALTER TABLE outbox_event_away RENAME TO outbox_event');
    }
    expect((await request(app.getHttpServer()).get('/health')).status).toBe(200);
  });

  it('is down (503) with a timeout message when its state query hangs past timeoutMs', async () => {
    const locker = await t.db.connect();
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE outbox_event IN ACCESS EXCLUSIVE MODE');
    try {
      probe.timeoutMs = 200;
      const res = await request(app.getHttpServer()).get('/health');
      expect(res.status).toBe(503);
      expect(res.body.error.outbox).toMatchObject({
        status: 'down',
        state: 'running',
        message: 'outbox state query timed out after 200 ms',
      });
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
    }
  });
});

describe('OutboxHealthIndicator while the app shuts down', () => {
  /** Emits one event and waits until its handler runs (held open by the test's gate). */
  async function emitAndRun(app: INestApplication): Promise<void> {
    await emitCommitted(app, memberInvited());
    await eventually('the handler is running', () => handled === 1);
  }

  it('is down (503) with state stopping while close() waits for a running handler', async () => {
    const gate = deferred();
    hold = gate.promise;
    const app = await startHealthApp({ shutdownGraceMs: 10_000 });
    const engine = app.get(OutboxEngine);
    let closing: Promise<void> | undefined;
    try {
      await emitAndRun(app);

      closing = app.close();
      await eventually('the engine is stopping', () => engine.state === 'stopping');
      // beforeApplicationShutdown has not returned, so the HTTP server still serves.
      const res = await request(app.getHttpServer()).get('/health');

      expect(res.status).toBe(503);
      expect(res.body.error.outbox).toMatchObject({
        status: 'down',
        state: 'stopping',
        inFlight: 1,
        message: 'dispatcher is stopping',
      });
    } finally {
      gate.resolve();
      await (closing ?? app.close());
    }
    expect(engine.state).toBe('stopped');
  });

  it('is down (503) for a probe whose state query was still out when close() began', async () => {
    const gate = deferred();
    hold = gate.promise;
    const app = await startHealthApp({ shutdownGraceMs: 10_000 });
    const engine = app.get(OutboxEngine);
    const locker = await t.db.connect();
    let closing: Promise<void> | undefined;
    try {
      await emitAndRun(app);
      // The probe's state query waits on the lock while the app is still running.
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE outbox_event IN ACCESS EXCLUSIVE MODE');
      probe.timeoutMs = 10_000;
      const answer = request(app.getHttpServer())
        .get('/health')
        .then((res) => res);
      await eventually('the probe waits on the lock', async () => {
        const { rows } = await t.sql.query(
          `SELECT 1 FROM pg_stat_activity
           WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        return rows.length > 0;
      });

      closing = app.close();
      await eventually('the engine is stopping', () => engine.state === 'stopping');
      await locker.query('ROLLBACK');
      const res = await answer;

      // A pod that began shutting down must not answer ready, whenever the probe came in.
      expect(res.status).toBe(503);
      expect(res.body.error.outbox).toMatchObject({
        status: 'down',
        state: 'stopping',
        message: 'dispatcher is stopping',
      });
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end();
      gate.resolve();
      await (closing ?? app.close());
    }
  });
});

describe('OutboxRetentionSweeper on its schedule', () => {
  const retention = {
    retention: { enabled: true, retentionMs: 60_000, sweepIntervalMs: 1000 },
  };

  it('deletes delivered events past the retention on its interval and keeps live, dead and recently delivered ones', async () => {
    const old = await delivered(`now() - interval '1 hour'`);
    const kept = [
      await delivered('now()'),
      await pendingLater(),
      await insert({}),
      await dead(),
    ].sort();
    // Nothing handles the live row's lease here: the engine stays off.
    const app = await createOutboxApp({
      url: t.db.url,
      outbox: { autoStart: false, ...retention },
      imports: [ScheduleModule.forRoot()],
    });
    try {
      await eventually('the sweep deletes the expired delivered event', async () => {
        const { rows } = await t.sql.query('SELECT 1 FROM outbox_event WHERE id = $1', [old]);
        return rows.length === 0;
      });
      expect(await ids()).toEqual(kept);
    } finally {
      await app.close();
    }
  });

  it("registers its job under OUTBOX_RETENTION_JOB in the app's SchedulerRegistry and removes it at close", async () => {
    const app = await createOutboxApp({
      url: t.db.url,
      outbox: { autoStart: false, ...retention },
      imports: [ScheduleModule.forRoot()],
    });
    const registry = app.get(SchedulerRegistry);
    let closed = false;
    try {
      expect(registry.getIntervals()).toEqual([OUTBOX_RETENTION_JOB]);
      expect(registry.getInterval(OUTBOX_RETENTION_JOB)).toBeDefined();
      await app.close();
      closed = true;
      expect(registry.doesExist('interval', OUTBOX_RETENTION_JOB)).toBe(false);
    } finally {
      if (!closed) await app.close();
    }
  });
});
