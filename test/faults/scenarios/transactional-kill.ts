import { followUps, tally } from '../support/counts';
import { drainAll } from '../support/drain';
import type { StreamReport, WorkerStatus } from '../support/ipc';
import { sleep, waitUntil, type FaultChild } from '../support/processes';
import { ms, type Scenario } from '../support/scenario';

/**
 * Workers running a transactional handler are SIGKILLed while the handler's transaction is
 * open: its effect row and its follow-up event are written, its COMMIT not yet sent. The effect
 * is a plain INSERT into a table without any unique constraint, so only the outbox's transaction
 * can keep it single: each event must end with exactly one effect row and one follow-up event,
 * and every killed transaction must have left nothing and run again.
 */
export const transactionalKill: Scenario = {
  name: 'transactional-kill',
  title: 'SIGKILL workers between a transactional handler’s writes and its COMMIT',
  async run(ctx, outcome) {
    const kills = ctx.quick ? 8 : 20;
    const workerCount = 2;
    const options = { handlerDelayMs: 80, outbox: { concurrency: 6, batchSize: 20 } };
    const producer = await ctx.producer();
    let next = 0;
    const spawn = () => ctx.spawnWorker(`worker-${++next}`, options);
    const workers: FaultChild[] = Array.from({ length: workerCount }, spawn);
    await Promise.all(workers.map((w) => w.ready()));
    await producer.request({ cmd: 'stream-start', perSecond: 150, batch: 3, kind: 'tx' });

    let killedWithOpenTransaction = 0;
    let openTransactionsKilled = 0;
    for (let kill = 0; kill < kills; kill++) {
      const slot = kill % workers.length;
      const victim = workers[slot];
      await victim.ready();
      await sleep(100 + Math.random() * 400);
      // Aim at a moment when a transaction has written and not committed.
      let status: WorkerStatus | undefined;
      await waitUntil(
        async () => (status = await victim.request<WorkerStatus>({ cmd: 'status' })).txOpen > 0,
        3000,
        2,
      );
      victim.signal('SIGKILL');
      await victim.waitForExit(5000);
      if ((status?.txOpen ?? 0) > 0) killedWithOpenTransaction++;
      openTransactionsKilled += status?.txOpen ?? 0;
      workers[slot] = spawn();
    }
    await Promise.all(workers.map((w) => w.ready()));
    const stream = await producer.request<StreamReport>({ cmd: 'stream-stop' }, 30_000);
    ctx.note(`${kills} kills done, ${stream.committed} events emitted; draining`);
    const drainMs = await drainAll(ctx.db, 90_000);

    const counts = await tally(ctx.db);
    const chained = await followUps(ctx.db);
    outcome.figure('SIGKILLs', kills);
    outcome.figure('  with a transaction open', killedWithOpenTransaction);
    outcome.figure('open transactions killed', openTransactionsKilled);
    outcome.figure('follow-up events missing', chained.missing);
    outcome.figure('follow-up events extra', chained.extra);
    outcome.figure('drain after the last kill', ms(drainMs));
    outcome.tally(counts);
    outcome.check(
      'kills landed between writes and COMMIT',
      killedWithOpenTransaction > 0,
      killedWithOpenTransaction,
    );
    // A killed transaction left its call without an effect: it was rolled back and rerun.
    outcome.check('killed transactions ran again', counts.extraCalls > 0, counts.extraCalls);
    outcome.checkZero('events without their follow-up', chained.missing);
    outcome.checkZero('follow-ups beyond one per event', chained.extra);
    outcome.summary.recover = `drain ${ms(drainMs)}`;
  },
};
