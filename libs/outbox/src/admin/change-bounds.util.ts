import { decodeIdCursor } from '../store/admin/keyset-cursor.util';
import type { ChangeBounds } from '../store/admin/dead-letter.types';
import { InvalidOutboxAdminQueryError } from '../outbox.errors';

/** Events one replay or discard by filter changes when `maxRows` is not given. */
export const DEFAULT_MAX_ROWS = 10_000;
/** The largest `maxRows`: what one call may hold in counts and keep a pooled connection busy. */
export const MAX_MAX_ROWS = 100_000;
/** How long a replay or discard by filter starts batches when `timeBudgetMs` is not given. */
export const DEFAULT_TIME_BUDGET_MS = 10_000;
/** The longest `timeBudgetMs`: an operator's call, not a migration. */
export const MAX_TIME_BUDGET_MS = 300_000;
/** Tags the `cursor` of a change by filter. */
export const CHANGE_CURSOR = 'dead-letter-change';

/** The bounds of a change by filter, checked; `afterId` from the cursor, null to start. */
export interface CheckedBounds {
  maxRows: number;
  timeBudgetMs: number;
  afterId: string | null;
}

/**
 * `maxRows`, `timeBudgetMs` and `after` of a replay or discard, checked: with a filter, each
 * within its range (defaults when absent); with ids (`byFilter` false), refused when given, since
 * the ids bound the change already. Throws an `InvalidOutboxAdminQueryError` naming the field.
 */
export function checkChangeBounds(options: ChangeBounds, byFilter: boolean): CheckedBounds | null {
  const { maxRows, timeBudgetMs, after } = options;
  if (!byFilter) {
    for (const [field, value] of Object.entries({ maxRows, timeBudgetMs, after })) {
      if (value !== undefined) {
        throw new InvalidOutboxAdminQueryError(
          `options.${field}`,
          value,
          'left out with an ids selector (the ids bound the change)',
        );
      }
    }
    return null;
  }
  return {
    maxRows: integerIn('options.maxRows', maxRows ?? DEFAULT_MAX_ROWS, MAX_MAX_ROWS),
    timeBudgetMs: integerIn(
      'options.timeBudgetMs',
      timeBudgetMs ?? DEFAULT_TIME_BUDGET_MS,
      MAX_TIME_BUDGET_MS,
    ),
    afterId: after === undefined ? null : cursorId(after),
  };
}

function integerIn(field: string, value: unknown, max: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1 || value > max) {
    throw new InvalidOutboxAdminQueryError(field, value, `an integer from 1 to ${max}`);
  }
  return value;
}

function cursorId(after: unknown): string {
  const id = typeof after === 'string' ? decodeIdCursor(CHANGE_CURSOR, after) : null;
  if (id === null) {
    throw new InvalidOutboxAdminQueryError(
      'options.after',
      after,
      'the `cursor` of a previous replay or discard by filter',
    );
  }
  return id;
}
