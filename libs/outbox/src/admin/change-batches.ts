import type { AdminStore } from '../store/admin/admin.store';
import type { DeadLetterChangeBatch } from '../store/admin/dead-letter-changes.sql';
import type { DeadLetterChange, DeadLetterFilter } from '../store/admin/dead-letter.types';
import { encodeIdCursor } from '../store/admin/keyset-cursor.util';
import type { OutboxTelemetry } from '../telemetry/outbox.telemetry';
import { CHANGE_CURSOR, type CheckedBounds } from './change-bounds.util';

/** Rows per replay or discard statement: each batch is one short transaction. */
export const CHANGE_BATCH = 500;
/** Ids a change by filter answers (`sampleIds`). */
export const SAMPLE_IDS = 100;
/** Sorts before every UUID: where a keyset walk by id starts. */
const FIRST_ID = '00000000-0000-0000-0000-000000000000';

/** One replay or discard, checked, as `changeInBatches` runs it. */
export interface ChangeRun {
  change: DeadLetterChangeBatch['change'];
  filter: DeadLetterFilter;
  /** The ids of an ids selector; null with a filter. */
  ids: readonly string[] | null;
  /** With a filter: where it stops and where it starts; null with ids. */
  bounds: CheckedBounds | null;
  dryRun: boolean;
  actor?: string;
}

/**
 * Runs a change in batches of `CHANGE_BATCH` by id, each one statement committed on its own.
 * With ids, until they are all looked at. With a filter, until its selection ends, `maxRows`
 * events changed (the last batch is cut to fit) or the time budget has passed (checked before
 * each batch after the first); a stop before the end answers a cursor at the last id looked at,
 * and the same call with it as `after` goes on from there, each event once. Counts and types are
 * kept for every event; ids only for the sample (with ids, every one).
 */
export async function changeInBatches(
  store: AdminStore,
  telemetry: OutboxTelemetry,
  run: ChangeRun,
): Promise<DeadLetterChange> {
  const { change, filter, ids, bounds, dryRun, actor } = run;
  const deadline = Date.now() + (bounds?.timeBudgetMs ?? Infinity);
  const maxRows = bounds?.maxRows ?? Infinity;
  const countsByType: Record<string, number> = {};
  const kept: string[] = [];
  let count = 0;
  let afterId = bounds?.afterId ?? FIRST_ID;
  let stoppedBy: DeadLetterChange['stoppedBy'] = null;
  for (;;) {
    const limit = Math.min(CHANGE_BATCH, maxRows - count);
    const rows = unwrap(
      await store.changeDeadLetters({ change, filter, ids, afterId, limit, dryRun, actor }),
    );
    const batchTypes: string[] = [];
    for (const row of rows) {
      if (!row.changed && !dryRun) continue;
      count += 1;
      countsByType[row.type] = (countsByType[row.type] ?? 0) + 1;
      if (ids || kept.length < SAMPLE_IDS) kept.push(row.id);
      if (row.changed) batchTypes.push(row.type);
    }
    // Each batch committed on its own: counted as it lands, so a failure later leaves no
    // committed change unreported.
    if (batchTypes.length > 0) telemetry.changed(change.kind, batchTypes);
    const last = rows[rows.length - 1];
    if (!last || rows.length < limit) break;
    afterId = last.id;
    if (!bounds) continue;
    if (count >= maxRows) stoppedBy = 'maxRows';
    else if (Date.now() >= deadline) stoppedBy = 'timeBudget';
    if (stoppedBy) break;
  }
  const done = new Set(kept);
  return {
    dryRun,
    count,
    countsByType,
    sampleIds: kept.slice(0, SAMPLE_IDS),
    ids: kept,
    unchanged: ids ? [...new Set(ids)].filter((id) => !done.has(id)) : [],
    cursor: stoppedBy ? encodeIdCursor(CHANGE_CURSOR, afterId) : null,
    stoppedBy,
  };
}

function unwrap<T>(result: { ok: true; value: T } | { ok: false; error: Error }): T {
  if (!result.ok) throw result.error;
  return result.value;
}
