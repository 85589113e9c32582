import { firstCallBy, tally } from '../support/counts';
import { drainAll } from '../support/drain';
import type { EmitReport, WorkerStatus } from '../support/ipc';
import { waitUntil } from '../support/processes';
import { ms, type Scenario } from '../support/scenario';

const EVENTS = 20;
const SLOW_MS = 2000;
const OPTIONS = {
  leaseMs: 60_000,
  handlerTimeoutMs: 10_000,
  concurrency: 4,
  // One claim takes every event: min(batchSize, concurrency × floor((lease − 1 s) / budget)).
  batchSize: EVENTS,
  shutdownGraceMs: 5000,
  // Neither the poll nor the lease end may explain the takeover; only the release's NOTIFY can.
  pollIntervalMs: 60_000,
};

/**
 * A worker holding a claim of slow events gets SIGTERM while its first handlers run. It must
 * stop taking records, let the running handlers finish and settle them once, give the
 * unstarted records back at once, and exit within its grace. A second worker, idle until then
 * and with a minute of lease and poll ahead of it, takes the released records right away.
 */
export const sigterm: Scenario = {
  name: 'sigterm',
  title: 'SIGTERM with slow in-flight handlers: bounded exit, release, takeover',
  async run(ctx, outcome) {
    const producer = await ctx.producer();
    const [leaving, staying] = await Promise.all([
      ctx.worker('leaving', { outbox: OPTIONS }),
      ctx.worker('staying', { outbox: OPTIONS, holdDispatcher: true }),
    ]);
    await producer.request<EmitReport>({
      cmd: 'emit',
      count: EVENTS,
      batch: EVENTS,
      kind: 'slow',
      slowMs: SLOW_MS,
    });
    const running = await waitUntil(
      async () =>
        (await leaving.request<WorkerStatus>({ cmd: 'status' })).inFlight ===
        2 * OPTIONS.concurrency,
      15_000,
      10,
    );
    if (!running) throw new Error('the leaving worker never had a full round of handlers running');
    const [leased] = await ctx.db.query(
      `SELECT count(*)::int AS n, (extract(epoch FROM min(lease_expires_at)) * 1000)::float8 AS lease_end
       FROM outbox_event WHERE lease_expires_at > now()`,
    );
    await staying.request({ cmd: 'start-dispatcher' });

    const signalledAt = Date.now();
    leaving.signal('SIGTERM');
    const exit = await leaving.waitForExit(OPTIONS.shutdownGraceMs + 15_000);
    const exitMs = exit.at - signalledAt;
    const stoppedMs = leaving.afterSignal('dispatcher-stopped');
    await drainAll(ctx.db, 40_000);
    const takeoverAt = await firstCallBy(ctx.db, staying.pid, signalledAt);

    const [split] = await ctx.db.query(
      `WITH per_event AS (
         SELECT e.id, e.attempts, e.dispatched_at IS NOT NULL AS delivered,
                count(*) FILTER (WHERE c.pid = $1) AS by_leaving,
                count(*) FILTER (WHERE c.pid = $2) AS by_staying
         FROM outbox_event e LEFT JOIN fault_call c ON c.event_id = e.id
         GROUP BY e.id)
       SELECT count(*) FILTER (WHERE by_leaving > 0)::int AS started,
              count(*) FILTER (WHERE by_leaving = 2 AND by_staying = 0 AND delivered AND attempts = 1)::int AS settled_once,
              count(*) FILTER (WHERE by_leaving = 0)::int AS released,
              count(*) FILTER (WHERE by_leaving = 0 AND by_staying = 2 AND delivered AND attempts = 1)::int AS taken_over
       FROM per_event`,
      [leaving.pid, staying.pid],
    );
    const boundMs = OPTIONS.shutdownGraceMs + 2000;
    const leaseLeftMs = leased.lease_end - signalledAt;
    outcome.figure('events (each handler takes)', `${EVENTS} (${ms(SLOW_MS)})`);
    outcome.figure('leased by the leaving worker at SIGTERM', leased.n);
    outcome.figure(
      'shutdownGraceMs / leaseMs',
      `${ms(OPTIONS.shutdownGraceMs)} / ${ms(OPTIONS.leaseMs)}`,
    );
    outcome.figure('dispatcher stopped after SIGTERM', ms(stoppedMs));
    outcome.figure('process exited after SIGTERM', ms(exitMs));
    outcome.figure(
      'released records taken by the other worker after',
      ms(takeoverAt === null ? NaN : takeoverAt - signalledAt),
    );
    outcome.figure('lease left on them at SIGTERM', ms(leaseLeftMs));
    outcome.tally(await tally(ctx.db));
    outcome.check(
      `exited within shutdownGraceMs + 2 s (${ms(boundMs)})`,
      exitMs <= boundMs,
      ms(exitMs),
    );
    outcome.check('exit code 0', exit.code === 0, exit.signal ?? String(exit.code));
    outcome.check(
      'started events settled once by the leaving worker',
      split.started > 0 && split.settled_once === split.started,
      `${split.settled_once}/${split.started}`,
    );
    outcome.check(
      'unstarted events released and delivered by the other worker',
      split.released > 0 && split.taken_over === split.released,
      `${split.taken_over}/${split.released}`,
    );
    outcome.check(
      'takeover before the lease would have ended',
      takeoverAt !== null && takeoverAt < leased.lease_end,
      takeoverAt === null ? 'never' : `${ms(takeoverAt - signalledAt)} of ${ms(leaseLeftMs)}`,
    );
    outcome.checkZero('extra calls (none expected)', (await tally(ctx.db)).extraCalls);
    outcome.summary.recover = `exit ${ms(exitMs)}, takeover ${ms(takeoverAt === null ? NaN : takeoverAt - signalledAt)}`;
  },
};
