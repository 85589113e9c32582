import { performance } from 'node:perf_hooks';
import type { Client } from 'pg';

/** Kill rounds of a full run. */
export const ROUNDS = 100;
/** Text of the delivered-settle statement (MARK_DELIVERED in outbox.sql.ts) and of no other. */
export const SETTLE_FRAGMENT = 'dispatched_at = now()';
/** A round left without a hit gives up after this long (or when the next one is armed). */
const ROUND_MAX_MS = 1000;

const KILL = `
  SELECT pg_terminate_backend(pid) AS killed
  FROM pg_stat_activity
  WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()
    AND query LIKE $1`;

/**
 * Kill rounds, one armed per hundredth of the events handled. An armed round runs the kill
 * statement back to back until it terminates an active settle, the next round is armed, or
 * ROUND_MAX_MS pass; so the kills are spread over the run and each has a fair chance to land.
 */
export class KillRounds {
  rounds = 0;
  hits = 0;
  statements = 0;
  errors = 0;
  private armed = 0;
  private done = 0;
  private armedAt = 0;
  private stopped = false;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly client: Client,
    private readonly maxRounds: number,
  ) {}

  async connect(): Promise<void> {
    await this.client.connect();
    this.loop = this.run();
  }

  arm(): void {
    if (this.rounds >= this.maxRounds || this.stopped) return;
    this.armed = ++this.rounds;
    this.armedAt = performance.now();
    this.wake?.();
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.wake?.();
    await this.loop;
    await this.client.end();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      if (this.done === this.armed) {
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = undefined;
        continue;
      }
      if (performance.now() - this.armedAt > ROUND_MAX_MS) {
        this.done = this.armed;
        continue;
      }
      const round = this.armed;
      this.statements++;
      try {
        const { rows } = await this.client.query<{ killed: boolean }>(KILL, [
          `%${SETTLE_FRAGMENT}%`,
        ]);
        if (rows.some((row) => row.killed)) {
          this.hits++;
          this.done = round;
        }
      } catch {
        this.errors++;
        this.done = round;
      }
    }
  }
}
