import { liveRows } from './counts';
import type { FaultDatabase } from './database';
import { waitUntil } from './processes';

/**
 * Waits until no live outbox row is left (every event delivered or dead) and returns how long
 * that took, or NaN after `timeoutMs`. It does not throw: the tally that follows reports the
 * rows still live as a failed check, next to every other figure of the scenario.
 */
export async function drainAll(db: FaultDatabase, timeoutMs: number): Promise<number> {
  const startedAt = Date.now();
  const drained = await waitUntil(async () => (await liveRows(db)) === 0, timeoutMs, 100);
  return drained ? Date.now() - startedAt : NaN;
}
