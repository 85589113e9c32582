import { firstCallBy, tally } from '../support/counts';
import { drainAll } from '../support/drain';
import type { StreamReport } from '../support/ipc';
import { startPooler } from '../support/pgbouncer';
import { sleep, waitUntil, type FaultChild } from '../support/processes';
import { ms, type Outcome, type Scenario, type ScenarioContext } from '../support/scenario';

/**
 * The workers' TypeORM connections go through a PgBouncer in transaction mode and their LISTEN
 * connection goes straight to the server, as the README recommends. Under load the pooler is
 * restarted (every connection through it cut, nothing listening for a moment) and paused
 * (PAUSE: new transactions wait until RESUME). The same worker processes must go on delivering
 * after each, with nothing lost or delivered twice.
 */
export const poolerRestart: Scenario = {
  name: 'pooler-restart',
  title: 'PgBouncer (transaction mode) restarted and paused under load',
  async run(ctx, outcome) {
    const pooler = await startPooler(ctx.server);
    try {
      await underPooler(ctx, outcome, pooler);
    } finally {
      pooler.stop();
    }
  },
};

async function underPooler(
  ctx: ScenarioContext,
  outcome: Outcome,
  pooler: Awaited<ReturnType<typeof startPooler>>,
): Promise<void> {
  const rounds = ctx.quick ? 1 : 3;
  const pauseMs = ctx.quick ? 1500 : 3000;
  const options = {
    url: pooler.url(ctx.db.name),
    handlerDelayMs: 5,
    outbox: { listen: { connectionString: ctx.db.url } },
  };
  const producer = await ctx.producer();
  const workers = await Promise.all(['worker-1', 'worker-2'].map((l) => ctx.worker(l, options)));
  await producer.request({ cmd: 'stream-start', perSecond: 150, batch: 5 });
  await sleep(1000);
  const throughPooler = await pooler.clients(ctx.db.name);

  /** How long after `since` each worker made its first handler call; null: none within 30 s. */
  const resumed = async (since: number) =>
    Promise.all(
      workers.map(async (w: FaultChild) => {
        let first: number | null = null;
        await waitUntil(
          async () => w.crashed || (first = await firstCallBy(ctx.db, w.pid, since)) !== null,
          30_000,
          20,
        );
        return first === null ? null : (first as number) - since;
      }),
    );
  const afterRestart: (number | null)[] = [];
  const afterResume: (number | null)[] = [];
  for (let round = 1; round <= rounds; round++) {
    await sleep(1500);
    const restartAt = Date.now();
    await pooler.restart(500);
    const upAt = Date.now();
    const restarted = await resumed(upAt);
    afterRestart.push(...restarted);
    ctx.note(
      `restart ${round} took ${ms(upAt - restartAt)}; workers resumed after ${restarted.map(ms).join(', ')}`,
    );
    await sleep(1500);
    await pooler.pause();
    await sleep(pauseMs);
    const resumeAt = Date.now();
    await pooler.resume();
    const unpaused = await resumed(resumeAt);
    afterResume.push(...unpaused);
    ctx.note(
      `pause ${round} of ${ms(pauseMs)}; workers resumed after ${unpaused.map(ms).join(', ')}`,
    );
  }
  const stream = await producer.request<StreamReport>({ cmd: 'stream-stop' }, 30_000);
  const drainMs = await drainAll(ctx.db, 60_000);

  const worst = (values: (number | null)[]) =>
    values.some((v) => v === null) ? 'never' : ms(Math.max(...(values as number[])));
  outcome.figure('restarts / pauses', `${rounds} / ${rounds} (${ms(pauseMs)} each)`);
  outcome.figure('producer batches failed (retried)', stream.failedBatches);
  outcome.figure('first delivery after a restart (max over workers)', worst(afterRestart));
  outcome.figure('first delivery after RESUME (max over workers)', worst(afterResume));
  outcome.figure('drain after the last', ms(drainMs));
  outcome.tally(await tally(ctx.db));
  outcome.check('worker connections through the pooler', throughPooler > 0, throughPooler);
  outcome.checkZero('worker processes that crashed', workers.filter((w) => w.crashed).length);
  outcome.check(
    'every worker delivered again after every restart and RESUME',
    [...afterRestart, ...afterResume].every((v) => v !== null),
    `${[...afterRestart, ...afterResume].filter((v) => v !== null).length}/${afterRestart.length + afterResume.length}`,
  );
  outcome.summary.recover = `resume ${worst([...afterRestart, ...afterResume])}`;
}
