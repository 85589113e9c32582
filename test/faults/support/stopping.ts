import { firstCallBy } from './counts';
import type { FaultDatabase } from './database';
import type { WorkerStatus } from './ipc';
import { sleep, waitUntil, type FaultChild } from './processes';
import { ms } from './scenario';

export interface StopFigures {
  /** When the worker saw its dispatcher stopped, after SIGTERM; Infinity if it never said. */
  stoppedMs: number;
  /** When the process was gone, after SIGTERM; Infinity if not within the wait. */
  exitMs: number;
  waitedMs: number;
}

/**
 * SIGTERM, then a bounded wait for the exit. A worker still running afterwards counts as not
 * exiting (Infinity) and is left to the scenario's clean-up.
 */
export async function stopWithin(worker: FaultChild, waitMs: number): Promise<StopFigures> {
  const signalledAt = Date.now();
  worker.signal('SIGTERM');
  await Promise.race([worker.exited, sleep(waitMs)]);
  return {
    stoppedMs: worker.afterSignal('dispatcher-stopped') ?? Infinity,
    exitMs: worker.exit ? worker.exit.at - signalledAt : Infinity,
    waitedMs: waitMs,
  };
}

export function describeStop(stop: StopFigures): string {
  const exit = Number.isFinite(stop.exitMs)
    ? ms(stop.exitMs)
    : `still running at ${ms(stop.waitedMs)}`;
  return `${ms(stop.stoppedMs)} / ${exit}`;
}

/** Waits until each worker has started a handler since `sinceMs`; fails after 20 s. */
export async function waitForCalls(db: FaultDatabase, workers: FaultChild[], sinceMs: number) {
  for (const worker of workers) {
    const busy = await waitUntil(
      async () => (await firstCallBy(db, worker.pid, sinceMs)) !== null,
      20_000,
    );
    if (!busy) throw new Error(`${worker.label} delivered nothing`);
  }
}

/**
 * How long after `sinceMs` the worker's dispatcher completed a drain again (its claim was
 * answered); NaN if not within 30 s. The drain rather than a handler call, because another
 * worker may well have taken every event by then.
 */
export async function drainedAgainAfter(worker: FaultChild, sinceMs: number): Promise<number> {
  let last: number | null = null;
  await waitUntil(
    async () =>
      ((last = (await worker.request<WorkerStatus>({ cmd: 'status' })).lastDrainAt) ?? 0) > sinceMs,
    30_000,
    20,
  );
  return last !== null && last > sinceMs ? last - sinceMs : NaN;
}
