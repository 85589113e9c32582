import type { WorkerStatus } from './ipc';
import { sleep, waitUntil, type FaultChild } from './processes';

export interface KillRounds {
  kills: number;
  /** Kills that landed while the victim had handlers running. */
  midHandler: number;
  /** How long each victim took to boot, in ms. */
  bootTimes: number[];
  /** Each killed process and when its exit was seen (`Date.now()`): its runs ended by then. */
  killed: Array<{ pid: number; exitedAt: number }>;
}

/**
 * SIGKILLs the `workers` in turn, `kills` times, each after a pause of `pauseMs` (min, max) and
 * at a moment its handlers run (waiting up to 3 s for one), and replaces each victim with a
 * fresh process from `spawn`; `workers` holds the current ones throughout.
 */
export async function killInTurn(
  workers: FaultChild[],
  spawn: () => FaultChild,
  kills: number,
  pauseMs: [number, number],
): Promise<KillRounds> {
  const rounds: KillRounds = { kills, midHandler: 0, bootTimes: [], killed: [] };
  for (let kill = 0; kill < kills; kill++) {
    const slot = kill % workers.length;
    const victim = workers[slot];
    rounds.bootTimes.push(await victim.ready());
    await sleep(pauseMs[0] + Math.random() * (pauseMs[1] - pauseMs[0]));
    // Aim at a moment when handlers run: the kill then cuts a batch in half.
    let status: WorkerStatus | undefined;
    await waitUntil(
      async () => (status = await victim.request<WorkerStatus>({ cmd: 'status' })).inFlight > 0,
      3000,
      5,
    );
    victim.signal('SIGKILL');
    const exit = await victim.waitForExit(5000);
    rounds.killed.push({ pid: victim.pid, exitedAt: exit.at });
    if ((status?.inFlight ?? 0) > 0) rounds.midHandler++;
    workers[slot] = spawn();
  }
  await Promise.all(workers.map((w) => w.ready()));
  return rounds;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}
