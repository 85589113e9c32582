import { tally } from '../support/counts';
import { drainAll } from '../support/drain';
import { HANDLER_LIMITED, LIMITED_AT_ONCE } from '../support/fault-handlers';
import type { StreamReport } from '../support/ipc';
import { killInTurn, median } from '../support/kill-loop';
import type { FaultChild } from '../support/processes';
import { ms, type Scenario } from '../support/scenario';

/**
 * Most runs of the limited handler running at one instant, from each call's start and end; a
 * call of a killed process ends at its exit. $1 pids, $2 exits in `Date.now()` ms.
 */
const MOST_RUNNING = `
  WITH died AS (SELECT * FROM unnest($1::int[], $2::float8[]) AS d(pid, exited_ms)),
  runs AS (
    SELECT c.at, coalesce(c.ended_at, to_timestamp(d.exited_ms / 1000), 'infinity') AS ended
    FROM fault_call c LEFT JOIN died d ON d.pid = c.pid
    WHERE c.handler = $3
  ),
  edges AS (
    SELECT at, 1 AS delta FROM runs UNION ALL SELECT ended, -1 FROM runs
  )
  SELECT coalesce(max(running), 0)::int AS most
  FROM (SELECT sum(delta) OVER (ORDER BY at, delta ROWS UNBOUNDED PRECEDING) AS running
        FROM edges) AS r`;

/**
 * A handler limited to LIMITED_AT_ONCE runs at once across the workers, which are SIGKILLed in
 * turn while its runs are in flight, as a producer keeps emitting its events. A killed run never
 * gives its place back: the place runs out after the handler's budget plus 1 s, and the event
 * comes back after its lease. Never more than the limit running at once, nothing lost, no
 * delivery run twice; the places of the killed come back (the drain ends).
 */
export const limitsKill: Scenario = {
  name: 'limits-kill',
  title: `SIGKILL workers while a handler limited to ${LIMITED_AT_ONCE} at once runs`,
  async run(ctx, outcome) {
    const kills = ctx.quick ? 3 : 8;
    const workerCount = ctx.quick ? 2 : 3;
    const options = { handlerDelayMs: 200, outbox: { concurrency: 8 } };
    const producer = await ctx.producer();
    let next = 0;
    const spawn = () => ctx.spawnWorker(`worker-${++next}`, options);
    const workers: FaultChild[] = Array.from({ length: workerCount }, spawn);
    await Promise.all(workers.map((w) => w.ready()));
    await producer.request({ cmd: 'stream-start', perSecond: 40, batch: 4, kind: 'limited' });

    const rounds = await killInTurn(workers, spawn, kills, [800, 1600]);
    const stream = await producer.request<StreamReport>({ cmd: 'stream-stop' }, 30_000);
    ctx.note(`${kills} kills done, ${stream.committed} events emitted; draining`);
    const drainMs = await drainAll(ctx.db, 90_000);
    const [{ most }] = await ctx.db.query<{ most: number }>(MOST_RUNNING, [
      rounds.killed.map((k) => k.pid),
      rounds.killed.map((k) => k.exitedAt),
      HANDLER_LIMITED,
    ]);
    const [{ held }] = await ctx.db.query<{ held: number }>(
      'SELECT coalesce(sum(held), 0)::int AS held FROM outbox_handler_limit',
    );

    outcome.figure('workers (at any time)', workerCount);
    outcome.figure('SIGKILLs', kills);
    outcome.figure('  with handlers running', rounds.midHandler);
    outcome.figure('worker boot (median)', ms(median(rounds.bootTimes)));
    outcome.figure('most running at once', `${most} (limit ${LIMITED_AT_ONCE})`);
    outcome.figure('runs held by the limit', held);
    outcome.figure('drain after the last kill', ms(drainMs));
    outcome.tally(await tally(ctx.db));
    outcome.check('kills landed while handlers ran', rounds.midHandler > 0, rounds.midHandler);
    outcome.check('never more than the limit running at once', most <= LIMITED_AT_ONCE, most);
    outcome.check('the limit held runs back', held > 0, held);
    outcome.summary.recover = `drain ${ms(drainMs)}, most ${most} at once`;
  },
};
