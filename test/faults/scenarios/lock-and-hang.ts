import { Client } from 'pg';
import type { OutboxModuleOptions } from '@app/outbox';
import { startTcpProxy } from '../../support/tcp-proxy';
import { tally } from '../support/counts';
import { drainAll } from '../support/drain';
import { HealthWatch } from '../support/health';
import type { StreamReport } from '../support/ipc';
import { sleep, waitUntil, type FaultChild } from '../support/processes';
import { ms, type Outcome, type Scenario, type ScenarioContext } from '../support/scenario';
import {
  describeStop,
  drainedAgainAfter,
  stopWithin,
  waitForCalls,
  type StopFigures,
} from '../support/stopping';
import { WORKER_APPLICATION_NAME } from '../support/worker-app';

const GRACE_MS = 3000;
const OUTBOX: OutboxModuleOptions = {
  // The server cancels a statement after 1 s (0.5 s when waiting for a lock); the client gives
  // up on a connection that stays silent 1 s longer.
  statementTimeoutMs: 1000,
  lockTimeoutMs: 500,
  shutdownGraceMs: GRACE_MS,
  failedDrainRetryMs: 250,
};
/**
 * What the module documents: the dispatcher has stopped within the grace plus 1 s. Its deadline
 * is a timer of exactly that length, and the worker looks at the state every 5 ms, so 100 ms of
 * scheduling slack are allowed.
 */
const DOCUMENTED_STOP_MS = GRACE_MS + 1000 + 100;
/** What an orchestrator can live with: the whole process gone within the grace plus 2 s. */
const EXIT_BOUND_MS = GRACE_MS + 2000;
const EXIT_WAIT_MS = EXIT_BOUND_MS + 1500;
/**
 * A claim or a settle that failed because a statement ran out of time, on whichever side.
 * Counted once the worker drains again after the fault: the log line of a statement that timed
 * out just before the fault ended may still be on its way then (a settle is reported when it is
 * given up, near the end of a 5 s freeze).
 */
const TIMED_OUT =
  /(claim failed|settles keep failing): .*(timeout|no answer|no free pool connection|canceling statement)/i;

interface Phase {
  heldMs: number;
  timeouts: number;
  /** How long after the fault ended the worker drained again. */
  resumeMs: number;
  health?: string;
  stop?: StopFigures;
}

/**
 * Three ways the database stops serving the outbox while events flow. A migration-style
 * `LOCK TABLE outbox_event IN ACCESS EXCLUSIVE MODE` held in an open transaction: statements
 * must give up on their lock timeout rather than queue behind it, the loop must carry on once
 * the lock goes, and a worker told to stop meanwhile must stop within its grace. A frozen
 * server (SIGSTOP to every PostgreSQL process: connections stay open, nothing answers): the
 * same, with the client's own deadline as the only way out. A silent network path for one
 * worker, whose sockets never come back: only discarding them lets it recover.
 */
export const lockAndHang: Scenario = {
  name: 'lock-and-hang',
  title:
    'table lock held and a database that stops answering: timeouts, recovery, bounded shutdown',
  async run(ctx, outcome) {
    // Long enough in quick runs too for a settle that hangs to be given up while the server is
    // frozen (its lease is 4 s; each try waits out the 2 s client deadline).
    const holdMs = 8000;
    const producer = await ctx.producer();
    const [observer, victim] = await Promise.all([
      ctx.worker('observer', { outbox: OUTBOX, handlerDelayMs: 5 }),
      ctx.worker('stopped-under-lock', { outbox: OUTBOX, handlerDelayMs: 5 }),
    ]);
    const watch = new HealthWatch(observer, 100);
    await producer.request({ cmd: 'stream-start', perSecond: 80, batch: 4 });
    await waitForCalls(ctx.db, [observer, victim], Date.now());

    const lock = await tableLock(ctx, observer, victim, watch, holdMs);
    ctx.note(`lock held ${ms(lock.heldMs)}; observer drained again after ${ms(lock.resumeMs)}`);
    const frozen = await frozenServer(ctx, observer, watch, holdMs);
    ctx.note(
      `server frozen ${ms(frozen.heldMs)}; observer drained again after ${ms(frozen.resumeMs)}`,
    );
    const path = await silentPath(ctx, holdMs);
    ctx.note(`path silent ${ms(path.heldMs)}; its worker drained again after ${ms(path.resumeMs)}`);

    const stream = await producer.request<StreamReport>({ cmd: 'stream-stop' }, 60_000);
    await drainAll(ctx.db, 60_000);
    await watch.stop();
    outcome.figure('statementTimeoutMs / lockTimeoutMs / shutdownGraceMs', '1000 / 500 / 3000 ms');
    outcome.figure('producer batches failed', stream.failedBatches);
    report(outcome, 'table lock', lock);
    report(outcome, 'frozen server', frozen);
    report(outcome, 'silent path', path);
    outcome.tally(await tally(ctx.db));
    outcome.check('observer process alive', observer.alive, observer.alive ? 'yes' : 'no');
    outcome.summary.recover = `resume ${ms(lock.resumeMs)} / ${ms(frozen.resumeMs)} / ${ms(path.resumeMs)}`;
  },
};

/** The lock is held `holdMs`; a worker gets SIGTERM 1 s into it. */
async function tableLock(
  ctx: ScenarioContext,
  observer: FaultChild,
  victim: FaultChild,
  watch: HealthWatch,
  holdMs: number,
): Promise<Phase & { waiting: number }> {
  const locker = new Client({ connectionString: ctx.db.url, application_name: 'faults-migration' });
  await locker.connect();
  const before = observer.count(TIMED_OUT);
  let lockedAt = NaN;
  let stop: StopFigures;
  let waiting: number;
  try {
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE outbox_event IN ACCESS EXCLUSIVE MODE');
    lockedAt = Date.now();
    await sleep(1000);
    stop = await stopWithin(victim, EXIT_WAIT_MS);
    await sleep(Math.max(0, lockedAt + holdMs - Date.now()));
    [{ n: waiting }] = await ctx.db.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND wait_event_type = 'Lock' AND application_name = $1`,
      [WORKER_APPLICATION_NAME],
    );
  } finally {
    // Ending the session rolls back whatever is open, so the lock goes even after a failure.
    await locker.end();
  }
  const unlockedAt = Date.now();
  const resumeMs = await drainedAgainAfter(observer, unlockedAt);
  return {
    heldMs: unlockedAt - lockedAt,
    timeouts: observer.count(TIMED_OUT) - before,
    resumeMs,
    health: await downThenUp(watch, lockedAt),
    stop,
    waiting,
  };
}

/** Every server process stopped for `holdMs`; a fresh worker gets SIGTERM 2.5 s into it. */
async function frozenServer(
  ctx: ScenarioContext,
  observer: FaultChild,
  watch: HealthWatch,
  holdMs: number,
): Promise<Phase> {
  const victim = await ctx.worker('stopped-while-frozen', { outbox: OUTBOX, handlerDelayMs: 5 });
  await waitForCalls(ctx.db, [victim], Date.now());
  const before = observer.count(TIMED_OUT);
  const frozenAt = Date.now();
  ctx.server.suspend();
  let stop: StopFigures;
  try {
    // Past the first client deadline (statement timeout + 1 s) and the retry after it, so the
    // worker is stopped while waiting on a connection it opened to the frozen server.
    await sleep(2500);
    stop = await stopWithin(victim, EXIT_WAIT_MS);
    await sleep(Math.max(0, frozenAt + holdMs - Date.now()));
  } finally {
    ctx.server.resume();
  }
  const resumedAt = Date.now();
  const resumeMs = await drainedAgainAfter(observer, resumedAt);
  return {
    heldMs: resumedAt - frozenAt,
    timeouts: observer.count(TIMED_OUT) - before,
    resumeMs,
    health: await downThenUp(watch, frozenAt),
    stop,
  };
}

/**
 * One worker reaches the server through a proxy that, for `holdMs`, relays nothing: open
 * connections go silent and new ones are accepted and never answered. Those sockets never come
 * back, unlike a frozen server's.
 */
async function silentPath(ctx: ScenarioContext, holdMs: number): Promise<Phase> {
  const target = new URL(ctx.db.url);
  const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
  try {
    const proxied = new URL(ctx.db.url);
    proxied.port = String(proxy.port);
    const worker = await ctx.worker('behind-a-silent-path', {
      outbox: OUTBOX,
      url: proxied.toString(),
      handlerDelayMs: 5,
    });
    await waitForCalls(ctx.db, [worker], Date.now());
    const before = worker.count(TIMED_OUT);
    const cutAt = Date.now();
    proxy.setMode('hang');
    proxy.blackhole();
    await sleep(holdMs);
    proxy.setMode('forward');
    const restoredAt = Date.now();
    const resumeMs = await drainedAgainAfter(worker, restoredAt);
    return {
      heldMs: restoredAt - cutAt,
      timeouts: worker.count(TIMED_OUT) - before,
      resumeMs,
    };
  } finally {
    await proxy.close();
  }
}

/** Whether health answered down after `sinceMs` and up again later (waits up to 20 s). */
async function downThenUp(watch: HealthWatch, sinceMs: number): Promise<string> {
  const down = watch.first('down', sinceMs);
  if (!down) return 'never down';
  return (await waitUntil(() => !!watch.first('up', down.at), 20_000)) ? 'down, up' : 'down only';
}

function report(outcome: Outcome, fault: string, phase: Phase & { waiting?: number }): void {
  outcome.figure(`${fault}: held`, ms(phase.heldMs));
  if (phase.waiting !== undefined) {
    outcome.figure(`${fault}: outbox statements waiting on it as it went`, phase.waiting);
  }
  outcome.figure(`${fault}: claims and settles that timed out`, phase.timeouts);
  outcome.figure(`${fault}: drained again after it ended`, ms(phase.resumeMs));
  if (phase.stop) {
    outcome.figure(`${fault}: SIGTERM to dispatcher stopped / exit`, describeStop(phase.stop));
  }
  outcome.check(`${fault}: statements timed out`, phase.timeouts > 0, phase.timeouts);
  outcome.check(`${fault}: loop resumed`, Number.isFinite(phase.resumeMs), ms(phase.resumeMs));
  if (phase.health) {
    outcome.check(`${fault}: health down, then up`, phase.health === 'down, up', phase.health);
  }
  if (phase.stop) {
    outcome.check(
      `${fault}: dispatcher stopped within grace + 1 s (${ms(DOCUMENTED_STOP_MS)} with slack)`,
      phase.stop.stoppedMs <= DOCUMENTED_STOP_MS,
      ms(phase.stop.stoppedMs),
    );
    outcome.check(
      `${fault}: process exited within grace + 2 s (${ms(EXIT_BOUND_MS)})`,
      phase.stop.exitMs <= EXIT_BOUND_MS,
      Number.isFinite(phase.stop.exitMs) ? ms(phase.stop.exitMs) : 'not yet',
    );
  }
}
