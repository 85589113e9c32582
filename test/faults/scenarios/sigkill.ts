import { tally } from '../support/counts';
import { drainAll } from '../support/drain';
import type { StreamReport } from '../support/ipc';
import { killInTurn, median } from '../support/kill-loop';
import type { FaultChild } from '../support/processes';
import { ms, type Scenario } from '../support/scenario';

/**
 * Workers are SIGKILLed while their handlers run, one after another, as a producer keeps
 * emitting; each is replaced by a fresh process. A killed worker never settles its batch, so its
 * events come back when the lease ends and run again: those reruns are the expected extra
 * calls. Nothing may be lost, and no handler recorded as delivered may run again.
 */
export const sigkill: Scenario = {
  name: 'sigkill',
  title: 'SIGKILL workers mid-batch while a producer emits',
  async run(ctx, outcome) {
    const kills = ctx.quick ? 6 : 20;
    const workerCount = ctx.quick ? 2 : 3;
    const options = { handlerDelayMs: 30, outbox: { concurrency: 8, batchSize: 40 } };
    const producer = await ctx.producer();
    let next = 0;
    const spawn = () => ctx.spawnWorker(`worker-${++next}`, options);
    const workers: FaultChild[] = Array.from({ length: workerCount }, spawn);
    await Promise.all(workers.map((w) => w.ready()));
    await producer.request({ cmd: 'stream-start', perSecond: ctx.quick ? 200 : 250, batch: 5 });

    const rounds = await killInTurn(workers, spawn, kills, [150, 650]);
    const stream = await producer.request<StreamReport>({ cmd: 'stream-stop' }, 30_000);
    ctx.note(`${kills} kills done, ${stream.committed} events emitted; draining`);
    const drainMs = await drainAll(ctx.db, 90_000);

    outcome.figure('workers (at any time)', workerCount);
    outcome.figure('SIGKILLs', kills);
    outcome.figure('  with handlers running', rounds.midHandler);
    outcome.figure('worker boot (median)', ms(median(rounds.bootTimes)));
    outcome.figure('producer batches failed', stream.failedBatches);
    outcome.figure('drain after the last kill', ms(drainMs));
    outcome.tally(await tally(ctx.db));
    outcome.check('kills landed while handlers ran', rounds.midHandler > 0, rounds.midHandler);
    outcome.summary.recover = `drain ${ms(drainMs)}`;
  },
};
