import { tally } from '../support/counts';
import { drainAll } from '../support/drain';
import type { EmitReport } from '../support/ipc';
import { type FaultChild } from '../support/processes';
import { formatNumber, ms, type Scenario } from '../support/scenario';

/**
 * A backlog emitted before any worker runs, then four workers started together on it with the
 * module's default batch, concurrency and lease. Nothing fails here, so every handler must run
 * exactly once per event: any second call is a claim that overlapped another.
 */
export const throughput: Scenario = {
  name: 'throughput',
  title: '4 workers on a queued backlog: no duplicate delivery, throughput',
  async run(ctx, outcome) {
    const events = ctx.quick ? 8000 : 50_000;
    const producer = await ctx.producer();
    const emitStarted = Date.now();
    const emitted = await producer.request<EmitReport>(
      { cmd: 'emit', count: events, batch: 1000, kind: 'work' },
      120_000,
    );
    if (emitted.committed !== events) throw new Error(`emitted ${emitted.committed} of ${events}`);
    ctx.note(
      `${formatNumber(events)} events queued in ${ms(Date.now() - emitStarted)}; starting 4 workers`,
    );

    // The module's defaults except retention, which would delete the rows being counted.
    const defaults = {
      leaseMs: 60_000,
      handlerTimeoutMs: 10_000,
      batchSize: 100,
      concurrency: 20,
      pollIntervalMs: 30_000,
      shutdownGraceMs: 10_000,
    };
    const startedAt = Date.now();
    const workers: FaultChild[] = ['worker-1', 'worker-2', 'worker-3', 'worker-4'].map((label) =>
      ctx.spawnWorker(label, { outbox: defaults }),
    );
    await Promise.all(workers.map((w) => w.ready()));
    const drainMs = await drainAll(ctx.db, ctx.quick ? 120_000 : 300_000);
    const wallMs = Date.now() - startedAt;

    const [span] = await ctx.db.query(`
      SELECT (extract(epoch FROM max(e.dispatched_at) - min(c.at)) * 1000)::float8 AS ms
      FROM outbox_event e, (SELECT min(at) AS at FROM fault_call) AS c
      WHERE e.type = 'fault.work'`);
    const shares = await ctx.db.query(
      `SELECT pid, count(DISTINCT event_id)::int AS events FROM fault_call GROUP BY pid ORDER BY pid`,
    );
    const t = await tally(ctx.db);
    outcome.figure('events queued before the workers started', events);
    outcome.figure('workers', workers.length);
    outcome.figure(
      'from spawn to drained (includes boot)',
      ms(Number.isNaN(drainMs) ? NaN : wallMs),
    );
    outcome.figure('first handler call to last delivery', ms(span.ms));
    outcome.figure(
      'throughput (events/s, first call to last delivery)',
      Math.round((events * 1000) / span.ms),
    );
    outcome.figure('events per worker', shares.map((s) => formatNumber(s.events)).join(' / '));
    outcome.tally(t);
    outcome.checkZero('extra calls (none expected: nothing failed)', t.extraCalls);
    outcome.check(
      'every worker took part',
      shares.length === workers.length,
      `${shares.length}/${workers.length}`,
    );
    outcome.summary.recover = `${formatNumber(Math.round((events * 1000) / span.ms))} ev/s`;
  },
};
