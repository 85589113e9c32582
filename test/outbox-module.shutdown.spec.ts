import { Injectable, Module, type INestApplication, type OnModuleDestroy } from '@nestjs/common';
import {
  OnOutboxEvent,
  OutboxEngine,
  SHUTDOWN_MARGIN_MS,
  type HandlerContext,
  type OutboxEngineState,
  type OutboxEvent,
  type OutboxModuleOptions,
} from '@app/outbox';
import { useTestDatabase } from './support/test-database';
import { createOutboxApp, emitCommitted, eventually, useTestLeftovers } from './support/outbox-app';
import { eventsOn } from './support/events';
import { startTcpProxy } from './support/tcp-proxy';

/** Graceful shutdown through the real module: `app.close()` runs the hooks a SIGTERM would. */

interface Call {
  event: OutboxEvent;
  ctx: HandlerContext;
}

const calls: Call[] = [];
let behaviour: ((event: OutboxEvent, ctx: HandlerContext) => unknown) | undefined;

@Injectable()
class Mailer {
  @OnOutboxEvent('send-invitation', { events: ['member.invited'] })
  handle(event: OutboxEvent, ctx: HandlerContext) {
    calls.push({ event, ctx });
    return behaviour?.(event, ctx);
  }
}

/** What a feature module saw when Nest destroyed it. */
const seenAtFeatureDestroy: Array<{ state: OutboxEngineState; handlerDone: boolean }> = [];
let handlerDone = false;

@Injectable()
class FeatureClient implements OnModuleDestroy {
  constructor(private readonly engine: OutboxEngine) {}

  onModuleDestroy() {
    seenAtFeatureDestroy.push({ state: this.engine.state, handlerDone });
  }
}

@Module({ providers: [FeatureClient] })
class FeatureModule {}

const t = useTestDatabase({ truncateEach: ['outbox_event'] });
const { hold, closeAfterTest, close } = useTestLeftovers();

beforeEach(() => {
  calls.length = 0;
  behaviour = undefined;
});

async function start(outbox: OutboxModuleOptions = {}): Promise<INestApplication> {
  const app = await createOutboxApp({
    url: t.db.url,
    outbox: { retention: { enabled: false }, ...outbox },
    providers: [Mailer],
  });
  return closeAfterTest(app);
}

/** Emits the events in one committed transaction, so a single claim sees all of them. */
const emit = (app: INestApplication, aggregateIds: string[]) =>
  emitCommitted(
    app,
    eventsOn('member.invited', aggregateIds, (member) => ({ email: `${member}@example.test` })),
  );

async function row(id: string) {
  const { rows } = await t.sql.query(
    `SELECT *, lease_expires_at > now() AS leased, next_attempt_at <= now() AS due
     FROM outbox_event WHERE id = $1`,
    [id],
  );
  return rows[0];
}

describe('OutboxModule shutdown', () => {
  it('close() waits for a handler that finishes within the grace and settles its event', async () => {
    const gate = hold();
    behaviour = () => gate.promise;
    const app = await start({ shutdownGraceMs: 10_000 });
    const engine = app.get(OutboxEngine);
    const [id] = await emit(app, ['m-1']);
    await eventually('the handler is running', () => calls.length === 1);

    let closed = false;
    const closing = close(app).then(() => (closed = true));
    await eventually('the engine is stopping', () => engine.state === 'stopping');
    // The handler still holds the drain, so close() cannot have returned.
    expect(closed).toBe(false);
    gate.resolve();
    await closing;

    expect(engine.state).toBe('stopped');
    expect(calls).toHaveLength(1);
    expect(calls[0].ctx.signal.aborted).toBe(false);
    const stored = await row(id);
    expect(stored.dispatched_at).toBeInstanceOf(Date);
    expect(stored.lease_expires_at).toBeNull();
    expect(stored.attempts).toBe(1);
    expect(Object.keys(stored.deliveries)).toEqual(['send-invitation']);
  });

  it('close() abandons a handler that outlives the grace: it returns, the handler signal aborts, the event keeps its lease and another instance delivers it after the lease', async () => {
    const hung = hold();
    let hungHandlerReturned = false;
    behaviour = async () => {
      await hung.promise;
      hungHandlerReturned = true;
    };
    // The grace runs out long before the handler budget, which runs out before the lease.
    const options = { shutdownGraceMs: 300, handlerTimeoutMs: 1000, leaseMs: 3000 };
    const first = await start(options);
    const engine = first.get(OutboxEngine);
    const [id] = await emit(first, ['m-1']);
    await eventually('the handler is running', () => calls.length === 1);

    const closeStarted = Date.now();
    await close(first);
    const closeTookMs = Date.now() - closeStarted;

    // close() returned although the handler's promise was never resolved.
    expect(hungHandlerReturned).toBe(false);
    expect(engine.state).toBe('stopped');
    const signal = calls[0].ctx.signal;
    expect(signal.aborted).toBe(true);
    expect(String(signal.reason)).toContain('abandoned at shutdown');
    // The documented bound: the grace plus what stopping the listener and settling take.
    expect(closeTookMs).toBeLessThan(options.shutdownGraceMs + 5000);

    const abandoned = await row(id);
    expect(abandoned.dispatched_at).toBeNull();
    expect(abandoned.leased).toBe(true);
    expect(abandoned.attempts).toBe(1);
    expect(abandoned.last_error).toBeNull();
    expect(abandoned.deliveries).toEqual({});

    behaviour = undefined;
    const second = await start(options);
    await eventually(
      'the second instance delivers the event once the lease ends',
      async () => (await row(id)).dispatched_at !== null,
    );
    expect(calls.map((c) => [c.event.id, c.ctx.attempt])).toEqual([
      [id, 1],
      [id, 2],
    ]);
    expect(calls[1].ctx.signal.aborted).toBe(false);
    expect(Object.keys((await row(id)).deliveries)).toEqual(['send-invitation']);
    await close(second);
    expect(hungHandlerReturned).toBe(false);
  });

  it('without a local queue it claims only what its free slots can start; close() settles the running event and leaves the rest untouched for others', async () => {
    const gate = hold();
    behaviour = () => (calls.length === 1 ? gate.promise : undefined);
    const app = await start({
      concurrency: 1,
      shutdownGraceMs: 10_000,
      tuning: { localQueue: { size: 0 } },
    });
    const engine = app.get(OutboxEngine);
    const ids = await emit(app, ['m-1', 'm-2', 'm-3']);
    await eventually('the first handler is running', () => calls.length === 1);

    // One slot: one event claimed; the others wait unleased, free for another instance.
    const runningId = calls[0].event.id;
    const waitingIds = ids.filter((id) => id !== runningId);
    expect(waitingIds).toHaveLength(2);
    expect(await row(runningId)).toMatchObject({ attempts: 1, leased: true });
    for (const id of waitingIds) {
      expect(await row(id)).toMatchObject({ attempts: 0, lease_expires_at: null, due: true });
    }
    expect(engine.slots).toEqual({ size: 1, busy: 1, overdue: 0 });

    const closing = close(app);
    await eventually('the engine is stopping', () => engine.state === 'stopping');
    gate.resolve();
    await closing;

    expect(calls.map((c) => c.event.id)).toEqual([runningId]);
    const settled = await row(runningId);
    expect(settled.dispatched_at).toBeInstanceOf(Date);
    expect(settled.lease_expires_at).toBeNull();
    expect(settled.attempts).toBe(1);
    for (const id of waitingIds) {
      const waiting = await row(id);
      expect(waiting.lease_expires_at).toBeNull();
      expect(waiting.attempts).toBe(0);
      expect(waiting.dispatched_at).toBeNull();
      expect(waiting.dead_at).toBeNull();
      expect(waiting.last_error).toBeNull();
      expect(waiting.due).toBe(true);
    }
  });

  it('close() gives the events waiting in the local queue back unstarted, and a peer takes them long before any lease or poll would wake it', async () => {
    const gate = hold();
    // The first event to start holds the one slot, whichever a claim gave first.
    behaviour = () => (calls.length === 1 ? gate.promise : undefined);
    // A lease and a poll far beyond the 20 s `eventually` bound, and a TTL beyond it too: only
    // the give-back at close can hand the queued events to the peer in time.
    const options = {
      concurrency: 1,
      leaseMs: 120_000,
      tuning: { pollIntervalMs: 120_000, localQueue: { ttlMs: 60_000 } },
    };
    const first = await start(options);
    const engine = first.get(OutboxEngine);
    const ids = await emit(first, ['m-1', 'm-2', 'm-3']);
    let runningId = '';
    let queuedIds: string[] = [];
    await eventually('the first handler runs and the others wait in its local queue', async () => {
      if (calls.length !== 1) return false;
      runningId = calls[0].event.id;
      queuedIds = ids.filter((id) => id !== runningId);
      const rows = await Promise.all(queuedIds.map(row));
      return rows.every((r) => r.attempts === 1 && r.leased);
    });
    expect(engine.slots).toEqual({ size: 1, busy: 1, overdue: 0 });

    const peer = await start({
      ...options,
      tuning: { ...options.tuning, localQueue: { size: 0 } },
    });
    const closing = close(first);
    await eventually('the first instance is stopping', () => engine.state === 'stopping');
    await eventually('the peer delivers the queued events', async () =>
      (await Promise.all(queuedIds.map(row))).every((r) => r.dispatched_at !== null),
    );
    // Given back unstarted: the attempt the first instance never ran is not counted.
    for (const id of queuedIds) expect(await row(id)).toMatchObject({ attempts: 1 });
    expect(calls.filter((c) => queuedIds.includes(c.event.id))).toHaveLength(2);
    gate.resolve();
    await closing;
    expect((await row(runningId)).dispatched_at).toBeInstanceOf(Date);
    await close(peer);
  });

  it('a peer takes the events a busy instance has no free slot for, long before any lease or poll would wake it', async () => {
    const gate = hold();
    behaviour = () => (calls.length === 1 ? gate.promise : undefined);
    // A lease and a poll far beyond the 20 s `eventually` bound: only claims by free slots count.
    const options = { concurrency: 1, leaseMs: 120_000, tuning: { pollIntervalMs: 120_000 } };
    const first = await start(options);
    const ids = await emit(first, ['m-1', 'm-2', 'm-3']);
    await eventually('the first handler is running', () => calls.length === 1);
    const runningId = calls[0].event.id;

    await start(options);
    const waitingIds = ids.filter((id) => id !== runningId);
    await eventually('the peer delivers the events the busy instance left', async () =>
      (await Promise.all(waitingIds.map(row))).every((r) => r.dispatched_at !== null),
    );
    // The first instance still holds its one event: nobody waited for it.
    expect((await row(runningId)).dispatched_at).toBeNull();

    const closing = close(first);
    gate.resolve();
    await closing;
    expect(calls.map((c) => c.event.id).sort()).toEqual([...ids].sort());
  });

  it("stops claiming and finishes running handlers before any feature module's onModuleDestroy runs", async () => {
    const gate = hold();
    seenAtFeatureDestroy.length = 0;
    handlerDone = false;
    behaviour = async () => {
      await gate.promise;
      handlerDone = true;
    };
    const app = await createOutboxApp({
      url: t.db.url,
      outbox: { retention: { enabled: false }, shutdownGraceMs: 10_000 },
      providers: [Mailer],
      imports: [FeatureModule],
    });
    closeAfterTest(app);
    const engine = app.get(OutboxEngine);
    await emit(app, ['m-1']);
    await eventually('the handler is running', () => calls.length === 1);

    const closing = close(app);
    await eventually('the engine is stopping', () => engine.state === 'stopping');
    // The feature module is still intact while the handler runs.
    expect(seenAtFeatureDestroy).toEqual([]);
    gate.resolve();
    await closing;

    expect(seenAtFeatureDestroy).toEqual([{ state: 'stopped', handlerDone: true }]);
  });

  it('stops within shutdownGraceMs plus its margin when the database stops answering mid-shutdown', async () => {
    const target = new URL(t.db.url);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
    const url = new URL(t.db.url);
    url.host = `127.0.0.1:${proxy.port}`;
    const gate = hold();
    behaviour = () => gate.promise;
    // Statements would wait far longer than the grace on their own.
    const options = { shutdownGraceMs: 500, tuning: { statementTimeoutMs: 60_000 } };
    const app = await createOutboxApp({
      url: url.toString(),
      outbox: { retention: { enabled: false }, ...options },
      providers: [Mailer],
    });
    try {
      const engine = app.get(OutboxEngine);
      await emit(app, ['m-1']);
      await eventually('the handler is running', () => calls.length === 1);

      // Every connection (pool and LISTEN) goes silent; the handler then ends, so its settle
      // is sent into the void.
      proxy.blackhole();
      gate.resolve();
      const stopStarted = Date.now();
      await engine.stop();
      const stopTookMs = Date.now() - stopStarted;

      expect(engine.state).toBe('stopped');
      // The documented bound, with room for a loaded machine; without it this waits a minute.
      expect(stopTookMs).toBeLessThan(options.shutdownGraceMs + SHUTDOWN_MARGIN_MS + 3000);
    } finally {
      await proxy.close();
      await app.close();
    }
  });

  it("the engine's state goes running, then stopping while a handler holds the drain, then stopped", async () => {
    const gate = hold();
    behaviour = () => gate.promise;
    const app = await start({ shutdownGraceMs: 10_000 });
    const engine = app.get(OutboxEngine);
    const seen: OutboxEngineState[] = [];
    const observe = () => {
      if (seen[seen.length - 1] !== engine.state) seen.push(engine.state);
    };
    observe();
    await emit(app, ['m-1']);
    await eventually('the handler is running', () => calls.length === 1);
    observe();

    const sampler = setInterval(observe, 1);
    try {
      const closing = close(app);
      await eventually('the engine is stopping', () => {
        observe();
        return engine.state === 'stopping';
      });
      gate.resolve();
      await closing;
    } finally {
      clearInterval(sampler);
    }
    observe();

    expect(seen).toEqual(['running', 'stopping', 'stopped']);
  });
});
