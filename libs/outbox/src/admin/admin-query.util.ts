import { decodeCursor, type KeysetPage } from '../store/admin/keyset-cursor.util';
import type { BlockedKeysQuery } from '../store/admin/blocked-keys.sql';
import { InvalidOutboxAdminQueryError } from '../outbox.errors';
import { isUuid } from '../common/uuid.util';
import type {
  BlockedKeysFilter,
  DeadLetterFilter,
  DeadLetterSelector,
} from '../store/admin/dead-letter.types';
import type { OutboxEventsFilter } from '../store/admin/event.types';

/**
 * `OutboxAdmin`'s input checks: each throws an `InvalidOutboxAdminQueryError` naming the field
 * and the value, before anything is sent to the database.
 */

export const DEFAULT_PAGE = 50;
export const MAX_PAGE = 500;
const MAX_SELECTED_IDS = 10_000;

/** The conditions of a filter that narrow it; the `include…` switches only widen it. */
const CONDITIONS = [
  'types',
  'handler',
  'fingerprint',
  'organizationId',
  'aggregateType',
  'aggregateId',
  'deadAfter',
  'deadBefore',
  'errorContains',
] as const;

/** Every key a dead-letter filter knows. */
const FILTER_KEYS = [...CONDITIONS, 'includeRetrying', 'includeDiscarded'] as const;

/**
 * Refuses a key `object` does not know: a misspelt key (`type` for `types`) would otherwise be
 * ignored and widen a list, a replay or a discard to everything.
 */
function checkKnownKeys(
  object: object,
  path: string,
  known: readonly string[],
  what = `${path} has`,
): void {
  for (const [key, value] of Object.entries(object)) {
    if (value !== undefined && !known.includes(key)) {
      throw new InvalidOutboxAdminQueryError(
        `${path}.${key}`,
        value,
        `left out: ${what} ${known.join(', ')}`,
      );
    }
  }
}

export function checkFilter(filter: DeadLetterFilter): void {
  if (typeof filter !== 'object' || filter === null) {
    throw new InvalidOutboxAdminQueryError('filter', filter, 'an object');
  }
  checkKnownKeys(filter, 'filter', FILTER_KEYS);
  for (const field of ['includeRetrying', 'includeDiscarded'] as const) {
    const value = filter[field];
    if (value !== undefined && typeof value !== 'boolean') {
      throw new InvalidOutboxAdminQueryError(`filter.${field}`, value, 'a boolean');
    }
  }
  for (const field of ['deadAfter', 'deadBefore'] as const) {
    const value = filter[field];
    if (value !== undefined && !(value instanceof Date && Number.isFinite(value.getTime()))) {
      throw new InvalidOutboxAdminQueryError(`filter.${field}`, value, 'a valid Date');
    }
  }
  if (filter.fingerprint !== undefined && !/^[0-9a-f]{32}$/.test(String(filter.fingerprint))) {
    throw new InvalidOutboxAdminQueryError(
      'filter.fingerprint',
      filter.fingerprint,
      'a fingerprint of groups (32 hex digits)',
    );
  }
  checkNonEmptyStrings(filter, [
    'handler',
    'organizationId',
    'aggregateType',
    'aggregateId',
    'errorContains',
  ]);
  checkTypes(filter.types);
}

export function checkSelector(selector: DeadLetterSelector): {
  filter: DeadLetterFilter;
  ids: string[] | null;
} {
  if (typeof selector !== 'object' || selector === null) {
    throw new InvalidOutboxAdminQueryError('selector', selector, '{ ids } or { filter }');
  }
  if (Object.hasOwn(selector, 'ids')) {
    checkKnownKeys(selector, 'selector', ['ids']);
    const ids: unknown = (selector as { ids: unknown }).ids;
    checkEventIds(ids, 'selector.ids', MAX_SELECTED_IDS);
    // Named one by one: whatever their state, within what the change applies to.
    return {
      filter: { includeRetrying: true, includeDiscarded: true },
      ids: ids.map((id) => id.toLowerCase()),
    };
  }
  checkKnownKeys(selector, 'selector', ['filter', 'all']);
  const { filter, all } = selector as { filter?: DeadLetterFilter; all?: unknown };
  if (filter === undefined) {
    throw new InvalidOutboxAdminQueryError('selector', selector, '{ ids } or { filter }');
  }
  checkFilter(filter);
  if (all !== undefined && typeof all !== 'boolean') {
    throw new InvalidOutboxAdminQueryError('selector.all', all, 'a boolean');
  }
  if (!all && CONDITIONS.every((field) => filter[field] === undefined)) {
    throw new InvalidOutboxAdminQueryError(
      'selector.filter',
      JSON.stringify(filter),
      'a filter with at least one condition, or `all: true` to select every dead letter',
    );
  }
  return { filter, ids: null };
}

/**
 * A page size from 1 to MAX_PAGE (DEFAULT_PAGE when absent), and the cursor decoded. `path`
 * names the object in errors; `known` are the keys it may hold.
 */
export function checkPage(
  page: { limit?: number; after?: string },
  cursorKind: string,
  cursorOf: string,
  { path = 'page', known = ['limit', 'after'] }: { path?: string; known?: string[] } = {},
): KeysetPage {
  if (typeof page !== 'object' || page === null) {
    throw new InvalidOutboxAdminQueryError(path, page, 'an object');
  }
  checkKnownKeys(page, path, known);
  const limit = page.limit ?? DEFAULT_PAGE;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_PAGE) {
    throw new InvalidOutboxAdminQueryError(
      `${path}.limit`,
      limit,
      `an integer from 1 to ${MAX_PAGE}`,
    );
  }
  if (page.after === undefined) return { limit, after: null };
  const after = typeof page.after === 'string' ? decodeCursor(cursorKind, page.after) : null;
  if (!after) {
    throw new InvalidOutboxAdminQueryError(
      `${path}.after`,
      page.after,
      `a \`next\` cursor of ${cursorOf}`,
    );
  }
  return { limit, after };
}

/** `OutboxAdmin.blockedKeys`' filter: its conditions, then its page. */
export function checkBlockedKeysFilter(
  filter: BlockedKeysFilter,
  cursorKind: string,
): BlockedKeysQuery {
  const page = checkPage(filter, cursorKind, 'blockedKeys', {
    path: 'filter',
    known: ['handler', 'key', 'limit', 'after'],
  });
  checkNonEmptyStrings(filter, ['handler', 'key']);
  return { handler: filter.handler ?? null, key: filter.key ?? null, ...page };
}

/** What `OutboxAdmin.events` filters by; each is a condition. */
const EVENT_CONDITIONS = [
  'types',
  'organizationId',
  'aggregateType',
  'aggregateId',
  'ids',
] as const;

/**
 * A filter of `OutboxAdmin.events`: at least one condition, and no field it does not know (a
 * misspelt `organizationId` would otherwise list every organization's events).
 */
export function checkEventsFilter(filter: OutboxEventsFilter): void {
  if (typeof filter !== 'object' || filter === null) {
    throw new InvalidOutboxAdminQueryError('filter', filter, 'an object');
  }
  checkKnownKeys(filter, 'filter', EVENT_CONDITIONS, 'events filters by');
  checkNonEmptyStrings(filter, ['organizationId', 'aggregateType', 'aggregateId']);
  checkTypes(filter.types);
  if (filter.ids !== undefined) checkEventIds(filter.ids, 'filter.ids', MAX_PAGE);
  if (EVENT_CONDITIONS.every((field) => filter[field] === undefined)) {
    throw new InvalidOutboxAdminQueryError(
      'filter',
      JSON.stringify(filter),
      `a filter with at least one of ${EVENT_CONDITIONS.join(', ')}`,
    );
  }
}

/** Each of `fields` that `filter` gives is a non-empty string. */
function checkNonEmptyStrings<F extends object>(
  filter: F,
  fields: readonly (keyof F & string)[],
): void {
  for (const field of fields) {
    const value: unknown = filter[field];
    if (value !== undefined && (typeof value !== 'string' || value.length === 0)) {
      throw new InvalidOutboxAdminQueryError(`filter.${field}`, value, 'a non-empty string');
    }
  }
}

/** A list of 1 to `max` event ids, each a UUID; `path` names it in errors. */
function checkEventIds(ids: unknown, path: string, max: number): asserts ids is string[] {
  if (!Array.isArray(ids) || ids.length === 0 || ids.length > max) {
    throw new InvalidOutboxAdminQueryError(path, ids, `a list of 1 to ${max} event ids`);
  }
  const bad: unknown = ids.find((id) => !isUuid(id));
  if (bad !== undefined) throw new InvalidOutboxAdminQueryError(path, bad, 'a UUID');
}

function checkTypes(types: unknown): void {
  if (
    types !== undefined &&
    (!Array.isArray(types) ||
      types.length === 0 ||
      types.some((t) => typeof t !== 'string' || t.length === 0))
  ) {
    // An empty list would match nothing; leave `types` out to mean every type.
    throw new InvalidOutboxAdminQueryError(
      'filter.types',
      types,
      'a non-empty list of non-empty strings',
    );
  }
}
