import { Injectable } from '@nestjs/common';
import {
  decodeCursor,
  type DeadLetterFilter,
  type DeadLetterGroup,
  type DeadLetterList,
  type DeadLetterPage,
  type OutboxEventDetail,
} from './dead-letters';
import { InvalidOutboxAdminQueryError } from './outbox.errors';
import { isUuid } from './outbox-event.validator';
import { OutboxRepository } from './outbox.repository';

const DEFAULT_PAGE = 50;
const MAX_PAGE = 500;
const MAX_GROUPS = 100;

/**
 * What an operator needs to see of events that failed, without SQL: dead letters page by page,
 * grouped so one outage reads as one line, and one event whole. The CLI and the dashboard read
 * through it. Every query is bounded by the repository's statement timeout; a store failure
 * throws its scrubbed `OutboxStoreError`, bad input an `InvalidOutboxAdminQueryError` naming the
 * field, before anything is sent.
 */
@Injectable()
export class OutboxAdmin {
  constructor(private readonly repository: OutboxRepository) {}

  /** Dead (and with `includeRetrying`, retrying) events, newest first, by keyset pages. */
  async list(filter: DeadLetterFilter = {}, page: DeadLetterPage = {}): Promise<DeadLetterList> {
    checkFilter(filter);
    const limit = page.limit ?? DEFAULT_PAGE;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_PAGE) {
      throw new InvalidOutboxAdminQueryError(
        'page.limit',
        limit,
        `an integer from 1 to ${MAX_PAGE}`,
      );
    }
    let after: { at: string; id: string } | null = null;
    if (page.after !== undefined) {
      after = decodeCursor(page.after);
      if (!after) {
        throw new InvalidOutboxAdminQueryError('page.after', page.after, 'a `next` cursor of list');
      }
    }
    return unwrap(await this.repository.listDeadLetters(filter, { limit, after }));
  }

  /** Dead letters grouped by (type, failed handler, error fingerprint), largest first. */
  async groups(filter: DeadLetterFilter = {}): Promise<DeadLetterGroup[]> {
    checkFilter(filter);
    return unwrap(await this.repository.groupDeadLetters(filter, MAX_GROUPS));
  }

  /** One event whole with its delivery map, whatever its state; null when there is none. */
  async show(id: string): Promise<OutboxEventDetail | null> {
    if (!isUuid(id)) {
      throw new InvalidOutboxAdminQueryError('id', id, 'a UUID');
    }
    return unwrap(await this.repository.findEvent(id));
  }
}

function checkFilter(filter: DeadLetterFilter): void {
  for (const field of ['deadAfter', 'deadBefore'] as const) {
    const value = filter[field];
    if (value !== undefined && !(value instanceof Date && Number.isFinite(value.getTime()))) {
      throw new InvalidOutboxAdminQueryError(`filter.${field}`, value, 'a valid Date');
    }
  }
  for (const field of [
    'handler',
    'organizationId',
    'aggregateType',
    'aggregateId',
    'errorContains',
  ] as const) {
    const value = filter[field];
    if (value !== undefined && (typeof value !== 'string' || value.length === 0)) {
      throw new InvalidOutboxAdminQueryError(`filter.${field}`, value, 'a non-empty string');
    }
  }
  const types = filter.types;
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

function unwrap<T>(result: { ok: true; value: T } | { ok: false; error: Error }): T {
  if (!result.ok) throw result.error;
  return result.value;
}
