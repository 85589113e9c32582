import type { OutboxLeaseStore } from '../store/lease/lease.store';
import type { MarkFailedOptions, TypeFilterOptions } from '../store/lease/lease.types';
import type { DeadScheduleCursor } from '../store/lease/dead-schedule.sql';

/** Dead rows per statement. */
const BATCH = 1000;
/** Statements per start at most: a million dead rows. */
const MAX_BATCHES = 1000;

export interface DeadScheduleCatchUp {
  /** Rows brought forward. */
  moved: number;
  /** Set when a statement failed; the next start tries again. */
  error?: string;
}

/**
 * Once per start: dead rows whose next replay was written under an older, longer `deadRetryMs`
 * (or with replays off) come forward to this configuration's schedule, in batches, each bounded
 * like every statement, for as long as `running()` holds. `onMoved` runs after a batch that moved
 * rows, which may be due now.
 */
export async function catchUpDeadSchedule(
  repository: OutboxLeaseStore,
  options: MarkFailedOptions & TypeFilterOptions,
  running: () => boolean,
  onMoved: () => void,
): Promise<DeadScheduleCatchUp> {
  const retries = [options.deadRetryMs, ...Object.values(options.deadRetryByType ?? {})];
  // No replays at all: nothing can come forward.
  if (retries.every((ms) => ms === Infinity)) return { moved: 0 };
  let moved = 0;
  let after: DeadScheduleCursor | null = null;
  for (let batch = 0; batch < MAX_BATCHES && running(); batch++) {
    const result = await repository.bringDeadForward(options, after, BATCH);
    if (!result.ok) return { moved, error: result.error.message };
    if (result.value.moved > 0) {
      moved += result.value.moved;
      onMoved();
    }
    after = result.value.next;
    if (!after) break;
  }
  return { moved };
}
