import { firstCallBy, tally } from '../support/counts';
import { drainAll } from '../support/drain';
import { Crew } from '../support/crew';
import { HealthWatch } from '../support/health';
import type { StreamReport } from '../support/ipc';
import { sleep, waitUntil } from '../support/processes';
import type { ShutdownMode } from '../support/pg-server';
import { ms, type Scenario } from '../support/scenario';

/**
 * The server is restarted under load, `-m fast` (sessions told to end) and `-m immediate` (a
 * crash: no checkpoint, recovery at start). Workers must stay up, report down while the
 * database is gone and up again after, and resume delivering without a restart of their own.
 */
export const pgRestart: Scenario = {
  name: 'pg-restart',
  title: 'PostgreSQL restarted (fast and immediate) under load',
  async run(ctx, outcome) {
    const modes: ShutdownMode[] = ctx.quick
      ? ['fast', 'immediate']
      : ['fast', 'immediate', 'fast', 'immediate'];
    const producer = await ctx.producer();
    const crew = new Crew(['worker-1', 'worker-2'], (label) =>
      ctx.spawnWorker(label, { handlerDelayMs: 5 }),
    );
    await crew.ready();
    let watches = crew.workers.map((w) => new HealthWatch(w));
    await producer.request({ cmd: 'stream-start', perSecond: 150, batch: 5 });

    let healthCycles = 0;
    const resumes: number[] = [];
    const resumesByMode: Record<string, number[]> = {};
    const recoveries: number[] = [];
    for (const [round, mode] of modes.entries()) {
      const steadySince = Date.now();
      await sleep(1500);
      for (const w of crew.workers) {
        const busy = await waitUntil(
          async () => (await firstCallBy(ctx.db, w.pid, steadySince)) !== null,
          20_000,
        );
        if (!busy) throw new Error(`${w.label} delivered nothing before restart ${round + 1}`);
      }
      const restartAt = Date.now();
      await ctx.server.restart(mode);
      const upAt = Date.now();
      const roundResumes: number[] = [];
      for (const [i, w] of crew.workers.entries()) {
        let first: number | null = null;
        await waitUntil(
          async () => w.crashed || (first = await firstCallBy(ctx.db, w.pid, upAt)) !== null,
          30_000,
          20,
        );
        roundResumes.push(first === null ? NaN : (first as number) - upAt);
        const down = watches[i].first('down', restartAt);
        const upAgain = await waitUntil(
          () => w.crashed || (!!down && !!watches[i].first('up', down.at)),
          30_000,
        );
        if (down && upAgain && !w.crashed) {
          healthCycles++;
          recoveries.push(watches[i].first('up', down.at)!.at - upAt);
        }
      }
      resumes.push(...roundResumes);
      (resumesByMode[mode] ??= []).push(...roundResumes);
      ctx.note(
        `restart ${round + 1} (-m ${mode}) took ${ms(upAt - restartAt)}; workers resumed after ` +
          roundResumes.map((r) => ms(r)).join(', '),
      );
      if (crew.workers.some((w) => w.crashed)) {
        await Promise.all(watches.map((w) => w.stop()));
        await crew.replaceCrashed();
        watches = crew.workers.map((w) => new HealthWatch(w));
      }
    }

    const stream = await producer.request<StreamReport>({ cmd: 'stream-stop' }, 30_000);
    const drainMs = await drainAll(ctx.db, 60_000);
    await Promise.all(watches.map((w) => w.stop()));

    outcome.figure('restarts', modes.map((m) => `-m ${m}`).join(', '));
    outcome.figure('producer batches failed (retried)', stream.failedBatches);
    for (const [mode, values] of Object.entries(resumesByMode)) {
      outcome.figure(`resume after -m ${mode} (max over workers)`, ms(Math.max(...values)));
    }
    outcome.figure('health up again after restart (max)', ms(Math.max(...recoveries)));
    outcome.figure('drain after the last restart', ms(drainMs));
    outcome.tally(await tally(ctx.db));
    outcome.checkZero('worker processes that crashed (replaced to go on)', crew.crashed.length);
    if (crew.crashed.length > 0) outcome.note(`crash: ${crew.reasons()}`);
    outcome.check(
      'every worker resumed after every restart',
      resumes.every((r) => Number.isFinite(r)),
      `${resumes.filter((r) => Number.isFinite(r)).length}/${resumes.length}`,
    );
    outcome.check(
      'health went down then up, per restart and worker',
      healthCycles === modes.length * crew.workers.length,
      `${healthCycles}/${modes.length * crew.workers.length}`,
    );
    outcome.summary.recover = `resume ${ms(Math.max(...resumes))}`;
  },
};
