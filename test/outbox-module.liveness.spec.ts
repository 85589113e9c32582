import { Controller, Get, Injectable, type INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import request from 'supertest';
import {
  CLAIM_WEDGED_MARGIN_MS,
  OnOutboxEvent,
  OutboxEngine,
  OutboxHealthIndicator,
  OutboxLivenessIndicator,
  OutboxLeaseStore,
  type ClaimOptions,
  type OutboxModuleOptions,
} from '@app/outbox';
import { useTestDatabase } from './support/test-database';
import { createOutboxApp, emitCommitted, eventually, useTestLeftovers } from './support/outbox-app';
import { memberInvited } from './support/events';
import { startTcpProxy } from './support/tcp-proxy';

/**
 * Liveness over real HTTP (Terminus): down only when this process cannot make progress (its event
 * loop stalled, its engine wedged), never for the database, never while it shuts down.
 */

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly readiness: OutboxHealthIndicator,
    private readonly liveness: OutboxLivenessIndicator,
  ) {}

  @Get()
  @HealthCheck()
  ready() {
    return this.health.check([() => this.readiness.isHealthy('outbox', { timeoutMs: 500 })]);
  }

  @Get('live')
  @HealthCheck()
  live() {
    return this.health.check([() => this.liveness.isAlive('outbox')]);
  }
}

/** What the handler does with each event; it returns at once when unset. */
let behaviour: ((signal: AbortSignal) => unknown) | undefined;
let calls = 0;

@Injectable()
class Mailer {
  @OnOutboxEvent('send-invitation', { events: ['member.invited'] })
  handle(_event: unknown, ctx: { signal: AbortSignal }) {
    calls++;
    return behaviour?.(ctx.signal);
  }
}

const t = useTestDatabase({ truncateEach: ['outbox_event'] });
const { hold, closeAfterTest, close } = useTestLeftovers();

beforeEach(() => {
  behaviour = undefined;
  calls = 0;
});

async function startApp(
  outbox: OutboxModuleOptions = {},
  url = t.db.url,
): Promise<{ app: INestApplication; engine: OutboxEngine }> {
  const app = await createOutboxApp({
    url,
    outbox: { retention: { enabled: false }, ...outbox },
    providers: [Mailer],
    controllers: [HealthController],
    imports: [TerminusModule.forRoot({ logger: false })],
  });
  closeAfterTest(app);
  await app.listen(0);
  return { app, engine: app.get(OutboxEngine) };
}

async function emit(app: INestApplication, payload: Record<string, unknown> = {}): Promise<void> {
  await emitCommitted(app, memberInvited({ payload }));
}

const live = (app: INestApplication) => request(app.getHttpServer()).get('/health/live');
const ready = (app: INestApplication) => request(app.getHttpServer()).get('/health');

/** Keeps the event loop busy for `ms`, as a synchronous computation would. */
function blockEventLoop(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // spinning
  }
}

describe('OutboxLivenessIndicator', () => {
  it("is up (200) on a running engine with this process's figures, and nothing else", async () => {
    const { app, engine } = await startApp();
    await eventually('the engine has drained once', () => engine.lastDrainAt !== null);

    const res = await live(app);

    expect(res.status).toBe(200);
    expect(res.body.info.outbox).toEqual({
      status: 'up',
      state: 'running',
      eventLoopStallMs: expect.any(Number),
      claimOutMs: null,
      slots: { size: 20, busy: 0, overdue: 0 },
      slotsOverdueMs: null,
    });
    // Called directly it answers at once, under the default key.
    expect(app.get(OutboxLivenessIndicator).isAlive()).toEqual({
      outbox: expect.objectContaining({ status: 'up', state: 'running' }),
    });
  });

  it('stays up while the database stops answering: claims wait out their bounds and fail, and a failed claim is progress', async () => {
    const target = new URL(t.db.url);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
    const url = new URL(t.db.url);
    url.host = `127.0.0.1:${proxy.port}`;
    try {
      // Short bounds and a fast poll: claims go out one after another, each waiting its bound.
      const { app, engine } = await startApp(
        { tuning: { statementTimeoutMs: 100, pollIntervalMs: 100, failedDrainRetryMs: 50 } },
        url.toString(),
      );
      await eventually('the engine has drained once', () => engine.lastDrainAt !== null);
      const claimBound = app.get(OutboxLeaseStore).longestClaimMs + CLAIM_WEDGED_MARGIN_MS;

      // Open connections go silent and new ones are accepted but never answered.
      proxy.setMode('hang');
      proxy.blackhole();
      const statuses = new Set<number>();
      let longestClaimOut = 0;
      const until = Date.now() + claimBound + 2000;
      while (Date.now() < until) {
        const res = await live(app);
        statuses.add(res.status);
        const outbox = res.body.info?.outbox ?? res.body.error?.outbox;
        longestClaimOut = Math.max(longestClaimOut, outbox.claimOutMs ?? 0);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }

      expect([...statuses]).toEqual([200]);
      // Claims were out while it looked, and none came back with rows.
      expect(longestClaimOut).toBeGreaterThan(500);
      // Readiness is what reports the database.
      const readiness = await ready(app);
      expect(readiness.status).toBe(503);
      expect(readiness.body.error.outbox.message).toBe('outbox state query timed out after 500 ms');
    } finally {
      await proxy.close();
    }
  });

  it('goes down (503) when the event loop stalls past eventLoopStallMs, and up again once the window has passed', async () => {
    const { app } = await startApp({
      liveness: { eventLoopStallMs: 300, eventLoopWindowMs: 1500 },
    });
    expect((await live(app)).status).toBe(200);

    blockEventLoop(800);
    // Asked before the timer has had its turn, it sees the tick that is overdue right now.
    expect(app.get(OutboxLivenessIndicator).isAlive().outbox).toMatchObject({
      status: 'down',
      eventLoopStallMs: expect.any(Number),
    });
    const res = await live(app);

    expect(res.status).toBe(503);
    const outbox = res.body.error.outbox;
    expect(outbox.status).toBe('down');
    expect(outbox.eventLoopStallMs).toBeGreaterThanOrEqual(600);
    expect(outbox.message).toBe(
      `the event loop stalled for ${outbox.eventLoopStallMs} ms within the last 1500 ms (max 300 ms)`,
    );
    await eventually(
      'the stall is out of the window',
      async () => (await live(app)).status === 200,
    );
  });

  it('goes down when a claim of its loop has waited past the longest any claim may take: the engine is wedged', async () => {
    const { app, engine } = await startApp({ tuning: { statementTimeoutMs: 100 } });
    await eventually('the engine has drained once', () => engine.lastDrainAt !== null);
    const repository = app.get(OutboxLeaseStore);
    const claimBound = repository.longestClaimMs + CLAIM_WEDGED_MARGIN_MS;
    // The store bounds every claim, so only a fault in the process can keep one out this long:
    // this one is kept out here, at the store, and answered once released.
    const gate = hold();
    const claim = repository.claim.bind(repository);
    repository.claim = (options: ClaimOptions) => gate.promise.then(() => claim(options));
    engine.wake();

    await eventually(
      'a claim is out',
      () => app.get(OutboxLivenessIndicator).isAlive().outbox.claimOutMs !== null,
    );
    const early = (await live(app)).body.info.outbox;
    expect(early).toMatchObject({ status: 'up', claimOutMs: expect.any(Number) });
    expect(early.claimOutMs).toBeLessThan(claimBound);

    await eventually('liveness is down', async () => (await live(app)).status === 503);
    const outbox = (await live(app)).body.error.outbox;
    expect(outbox.claimOutMs).toBeGreaterThan(claimBound);
    expect(outbox.message).toBe(
      `a claim has waited ${outbox.claimOutMs} ms for its answer, past the ${claimBound} ms any claim may take: the engine is wedged`,
    );

    gate.resolve();
    await eventually('the claim came back', async () => (await live(app)).status === 200);
  });

  it('goes down when every slot has been held for overdueSlotsMs by handlers past their budget that ignore their signal; a free slot keeps it up', async () => {
    const secret = 'payload-secret-4b1d9c';
    const { app, engine } = await startApp({
      concurrency: 2,
      handlerTimeoutMs: 200,
      // A timed-out event is not due again while the test looks: it stays in its own slot.
      retry: { baseMs: 60_000 },
      tuning: { localQueue: { size: 0 } },
      liveness: { overdueSlotsMs: 1000 },
    });
    const gate = hold();
    // Ignores its signal: it returns only when the test lets it.
    behaviour = () => gate.promise;

    await emit(app, { secret });
    await eventually('one slot is overdue', () => engine.slots.overdue === 1);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const oneOverdue = await live(app);
    expect(oneOverdue.status).toBe(200);
    expect(oneOverdue.body.info.outbox).toMatchObject({
      slots: { size: 2, busy: 1, overdue: 1 },
      slotsOverdueMs: null,
    });

    await emit(app, { secret });
    await eventually('both slots are overdue', () => engine.slots.overdue === 2);
    const justOverdue = await live(app);
    expect(justOverdue.status).toBe(200);
    expect(justOverdue.body.info.outbox.slotsOverdueMs).toBeLessThan(1000);
    await eventually('liveness is down', async () => (await live(app)).status === 503);
    const res = await live(app);
    const outbox = res.body.error.outbox;
    expect(outbox).toMatchObject({ status: 'down', slots: { size: 2, busy: 2, overdue: 2 } });
    expect(outbox.message).toBe(
      `every slot (2) has been held by a handler past its budget for ${outbox.slotsOverdueMs} ms (max 1000 ms): nothing can run here`,
    );
    expect(res.text).not.toContain(secret);

    gate.resolve();
    await eventually('the slots are free', async () => (await live(app)).status === 200);
    expect(calls).toBe(2);
  });

  it('reports figures only: no payload, handler error, connection string or option', async () => {
    const secret = 'handler-secret-7e2f0a';
    const { app, engine } = await startApp({
      listen: { connectionString: t.db.url },
      maxAttempts: 1,
    });
    behaviour = () => Promise.reject(new Error(`downstream refused ${secret}`));
    await emit(app, { secret });
    await eventually('the event is dead', async () => {
      const { rows } = await t.sql.query('SELECT 1 FROM outbox_event WHERE dead_at IS NOT NULL');
      return rows.length === 1;
    });
    await eventually('the engine listens', () => engine.listenerState === 'listening');

    const res = await live(app);

    expect(res.status).toBe(200);
    expect(Object.keys(res.body.info.outbox).sort()).toEqual(
      ['claimOutMs', 'eventLoopStallMs', 'slots', 'slotsOverdueMs', 'state', 'status'].sort(),
    );
    const { host, password } = new URL(t.db.url);
    for (const text of [secret, t.db.url, host, password].filter((part) => part.length > 0)) {
      expect(res.text).not.toContain(text);
    }
  });

  it('stays up (200) while the app shuts down and readiness reports the engine stopping', async () => {
    const { app, engine } = await startApp({ shutdownGraceMs: 10_000 });
    const gate = hold();
    behaviour = () => gate.promise;
    await emit(app);
    await eventually('the handler is running', () => calls === 1);

    const closing = close(app);
    try {
      await eventually('the engine is stopping', () => engine.state === 'stopping');
      const readiness = await ready(app);
      const liveness = await live(app);

      expect(readiness.status).toBe(503);
      expect(readiness.body.error.outbox.message).toBe('dispatcher is stopping');
      expect(liveness.status).toBe(200);
      expect(liveness.body.info.outbox).toMatchObject({
        status: 'up',
        state: 'stopping',
        claimOutMs: null,
        slotsOverdueMs: null,
      });
    } finally {
      gate.resolve();
      await closing;
    }
  });

  it('is up on an API pod whose engine never starts (autoStart: false)', async () => {
    const { app } = await startApp({ autoStart: false });

    const res = await live(app);

    expect(res.status).toBe(200);
    expect(res.body.info.outbox).toMatchObject({
      status: 'up',
      state: 'idle',
      claimOutMs: null,
      slotsOverdueMs: null,
    });
  });
});
