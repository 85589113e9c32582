import type { FaultChild } from './processes';

/**
 * A fixed number of workers kept running through a fault: one that exits on its own is counted
 * as a crash and replaced, so the scenario still drains and counts everything it produced.
 */
export class Crew {
  readonly workers: FaultChild[];
  readonly crashed: FaultChild[] = [];

  constructor(
    labels: string[],
    private readonly spawn: (label: string) => FaultChild,
  ) {
    this.workers = labels.map((label) => spawn(label));
  }

  async ready(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.ready()));
  }

  /** Replaces every worker that crashed since the last look. */
  async replaceCrashed(): Promise<void> {
    for (const [slot, worker] of this.workers.entries()) {
      if (!worker.crashed) continue;
      this.crashed.push(worker);
      this.workers[slot] = this.spawn(`${worker.label}'`);
      await this.workers[slot].ready();
    }
  }

  /** What each crashed worker said about its death (see crash-context.ts), deduplicated. */
  reasons(): string {
    const lines = this.crashed.flatMap((w) => {
      const tail = w
        .tail(120)
        .split('\n')
        .map((line) => line.trim());
      const context = tail.filter((line) =>
        /^(fault worker: uncaught|broken client|no broken)/.test(line),
      );
      return context.length > 0
        ? context
        : [tail.find((line) => /error/i.test(line)) ?? 'no error printed'];
    });
    return [...new Set(lines)].join('; ') || 'none';
  }
}
