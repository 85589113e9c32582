import type { OutboxStoreError } from '../outbox.errors';
import type { ExecutionResult } from './outbox.executor';

/** What one `drainOnce` did. */
export interface DrainReport {
  ok: boolean;
  /** The claim failed; nothing was delivered. */
  error?: OutboxStoreError;
  /** Most events the claim asked for. */
  limit: number;
  claimed: number;
  /** Events whose every remaining handler succeeded. */
  delivered: number;
  /** Events with a failed handler, scheduled again or dead. */
  failed: number;
  /** Events that ran out of attempts in this drain (each announced once). */
  dead: number;
  /** Events held back by a handler's limit, due again when it has room. */
  held: number;
  /** Settles that found their lease taken by a newer claim (nothing written). */
  stale: number;
  /** Settles the store kept refusing until the lease ran out (the handlers run again). */
  lost: number;
}

/** Counts one event's execution into `report`. */
export function tally(report: DrainReport, execution: ExecutionResult): void {
  if (execution === 'abandoned') return;
  const { settle, result } = execution;
  if (settle.kind === 'delivered') report.delivered++;
  if (settle.kind === 'failed') report.failed++;
  if (settle.kind === 'limited') report.held++;
  if (result === 'dead') report.dead++;
  if (result === 'stale') report.stale++;
  if (result === 'lost') report.lost++;
}
