import { Injectable, Logger, Optional } from '@nestjs/common';
import {
  decodeCursor,
  type DeadLetterChange,
  type DeadLetterChangeBatch,
  type DeadLetterSelector,
  type DiscardOptions,
  type ReplayOptions,
  type DeadLetterFilter,
  type DeadLetterGroup,
  type DeadLetterList,
  type DeadLetterPage,
  type OutboxEventDetail,
  type DispatcherInfo,
  type MinuteCount,
  type OutboxStatus,
} from './dead-letter.types';
import { InvalidOutboxAdminQueryError } from '../outbox.errors';
import { isUuid } from '../emit/outbox-event.validator';
import { OutboxRepository } from '../store/outbox.repository';
import { OutboxTelemetry } from '../common/outbox.telemetry';
import { DISPATCHER_REPORT_MS } from '../engine/outbox.heartbeat';

const DEFAULT_PAGE = 50;
const MAX_PAGE = 500;
const MAX_GROUPS = 100;
/** Rows per replay or discard statement: each batch is one short transaction. */
const CHANGE_BATCH = 500;
const MAX_SELECTED_IDS = 10_000;
const MAX_TEXT = 500;
/** Sorts before every UUID: where a keyset walk by id starts. */
const FIRST_ID = '00000000-0000-0000-0000-000000000000';

/**
 * What an operator needs to see of events that failed, without SQL: dead letters page by page,
 * grouped so one outage reads as one line, and one event whole. The CLI and the dashboard read
 * through it. Every query is bounded by the repository's statement timeout; a store failure
 * throws its scrubbed `OutboxStoreError`, bad input an `InvalidOutboxAdminQueryError` naming the
 * field, before anything is sent.
 *
 * `replay` and `discard` change events in batches of 500 rows, each one statement that also
 * records every change as an event (`outbox.event.replayed`, `outbox.event.discarded`) for audit
 * handlers. A failure part way leaves the batches before it done; running the same call again
 * finishes the work (a discard skips what it already discarded).
 */
@Injectable()
export class OutboxAdmin {
  private readonly logger = new Logger('Outbox');

  constructor(
    private readonly repository: OutboxRepository,
    @Optional() private readonly telemetry: OutboxTelemetry = new OutboxTelemetry(),
  ) {}

  /**
   * Exact counts by state and by type, and the lag. It reads every undelivered row (health
   * probes use the bounded `OutboxRepository.pendingState` instead).
   */
  async status(): Promise<OutboxStatus> {
    const byType = unwrap(await this.repository.backlogByType());
    const total = (
      field: 'due' | 'retrying' | 'inFlight' | 'expiredLeases' | 'dead' | 'discarded',
    ) => byType.reduce((sum, t) => sum + t[field], 0);
    const known = (values: (number | null)[]) => values.filter((v): v is number => v !== null);
    const waits = known(byType.map((t) => t.oldestDueWaitMs));
    const dues = known(byType.map((t) => t.nextDueInMs));
    return {
      due: total('due'),
      retrying: total('retrying'),
      inFlight: total('inFlight'),
      expiredLeases: total('expiredLeases'),
      dead: total('dead'),
      discarded: total('discarded'),
      lagMs: waits.length > 0 ? Math.max(...waits) : null,
      nextDueInMs: dues.length > 0 ? Math.min(...dues) : null,
      byType,
    };
  }

  /**
   * Every dispatcher that reports in (each running instance writes its state every 10 s), those
   * that stopped reporting included for a day, marked `reporting: false`.
   */
  async dispatchers(): Promise<DispatcherInfo[]> {
    const reports = unwrap(await this.repository.listDispatchers());
    return reports.map(({ silentMs, ...report }) => ({
      ...report,
      reporting: silentMs < 3 * DISPATCHER_REPORT_MS,
    }));
  }

  /** Events delivered in each of the last `minutes` minutes (1 to 1440, default 60), oldest first. */
  async throughput(minutes = 60): Promise<MinuteCount[]> {
    if (!Number.isSafeInteger(minutes) || minutes < 1 || minutes > 1440) {
      throw new InvalidOutboxAdminQueryError('minutes', minutes, 'an integer from 1 to 1440');
    }
    return unwrap(await this.repository.throughput(minutes));
  }

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

  /**
   * Makes the selected dead events due now, discarded ones included (they are restored): the
   * next claim runs every handler that has not delivered them, or only `handlers`. Events under
   * a lease (a relay is running them) are left alone. Each changed event is recorded as an
   * `outbox.event.replayed` event with the handlers and the actor.
   */
  async replay(
    selector: DeadLetterSelector,
    options: ReplayOptions = {},
  ): Promise<DeadLetterChange> {
    const { handlers } = options;
    if (
      handlers !== undefined &&
      (!Array.isArray(handlers) ||
        handlers.length === 0 ||
        handlers.some((h) => typeof h !== 'string' || h.length === 0))
    ) {
      throw new InvalidOutboxAdminQueryError(
        'options.handlers',
        handlers,
        'a non-empty list of handler names',
      );
    }
    return this.change(selector, options, { kind: 'replay', handlers });
  }

  /**
   * Sets the selected events aside: they are never replayed, stay listed (with
   * `includeDiscarded`) with the reason and the time, and are deleted by the retention sweep
   * after `retention.discardedRetentionMs`. Dead events, and retrying ones when the selector
   * names them or its filter includes them (they become dead). Each changed event is recorded
   * as an `outbox.event.discarded` event with the reason and the actor.
   */
  async discard(selector: DeadLetterSelector, options: DiscardOptions): Promise<DeadLetterChange> {
    const reason = (options as Partial<DiscardOptions> | undefined)?.reason;
    if (typeof reason !== 'string' || reason.trim().length === 0 || reason.length > MAX_TEXT) {
      throw new InvalidOutboxAdminQueryError(
        'options.reason',
        reason,
        `a non-blank string of at most ${MAX_TEXT} characters`,
      );
    }
    return this.change(selector, options, { kind: 'discard', reason });
  }

  private async change(
    selector: DeadLetterSelector,
    options: { dryRun?: boolean; actor?: string },
    change: DeadLetterChangeBatch['change'],
  ): Promise<DeadLetterChange> {
    const { dryRun = false, actor } = options;
    if (typeof dryRun !== 'boolean') {
      throw new InvalidOutboxAdminQueryError('options.dryRun', dryRun, 'a boolean');
    }
    if (
      actor !== undefined &&
      (typeof actor !== 'string' || actor.length === 0 || actor.length > MAX_TEXT)
    ) {
      throw new InvalidOutboxAdminQueryError(
        'options.actor',
        actor,
        `a non-empty string of at most ${MAX_TEXT} characters`,
      );
    }
    const { filter, ids } = checkSelector(selector);
    const changed: string[] = [];
    const changedTypes: string[] = [];
    let afterId = FIRST_ID;
    for (;;) {
      const rows = unwrap(
        await this.repository.changeDeadLetters({
          change,
          filter,
          ids,
          afterId,
          limit: CHANGE_BATCH,
          dryRun,
          actor,
        }),
      );
      const batchTypes: string[] = [];
      for (const row of rows) {
        if (row.changed || dryRun) changed.push(row.id);
        if (row.changed) batchTypes.push(row.type);
      }
      // Each batch committed on its own: counted as it lands, so a failure later leaves no
      // committed change unreported.
      if (batchTypes.length > 0) this.telemetry.changed(change.kind, batchTypes);
      changedTypes.push(...batchTypes);
      const last = rows[rows.length - 1];
      if (!last || rows.length < CHANGE_BATCH) break;
      afterId = last.id;
    }
    if (changedTypes.length > 0) this.logChange(change.kind, changedTypes, actor);
    const done = new Set(changed);
    return {
      dryRun,
      ids: changed,
      unchanged: ids ? [...new Set(ids)].filter((id) => !done.has(id)) : [],
    };
  }

  /** An operator's change, in the logs (the events themselves record each). */
  private logChange(kind: 'replay' | 'discard', types: string[], actor: string | undefined) {
    const verb = kind === 'replay' ? 'replayed' : 'discarded';
    this.logger.log(
      `Outbox ${verb} ${types.length} events by ${actor ?? 'an unnamed actor'}: ${countByType(types)}`,
    );
  }

  /** One event whole with its delivery map, whatever its state; null when there is none. */
  async show(id: string): Promise<OutboxEventDetail | null> {
    if (!isUuid(id)) {
      throw new InvalidOutboxAdminQueryError('id', id, 'a UUID');
    }
    return unwrap(await this.repository.findEvent(id));
  }
}

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

function checkFilter(filter: DeadLetterFilter): void {
  if (typeof filter !== 'object' || filter === null) {
    throw new InvalidOutboxAdminQueryError('filter', filter, 'an object');
  }
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

/** `a.b (3), c.d (1)`: how many of each type, most first. */
function countByType(types: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const type of types) counts.set(type, (counts.get(type) ?? 0) + 1);
  return [...counts]
    .sort((a, b) => b[1] - a[1])
    .map(([type, n]) => `${type} (${n})`)
    .join(', ');
}

function checkSelector(selector: DeadLetterSelector): {
  filter: DeadLetterFilter;
  ids: string[] | null;
} {
  if (typeof selector !== 'object' || selector === null) {
    throw new InvalidOutboxAdminQueryError('selector', selector, '{ ids } or { filter }');
  }
  if ('ids' in selector) {
    const ids: unknown = selector.ids;
    if (!Array.isArray(ids) || ids.length === 0 || ids.length > MAX_SELECTED_IDS) {
      throw new InvalidOutboxAdminQueryError(
        'selector.ids',
        ids,
        `a list of 1 to ${MAX_SELECTED_IDS} event ids`,
      );
    }
    const bad: unknown = ids.find((id) => !isUuid(id));
    if (bad !== undefined) throw new InvalidOutboxAdminQueryError('selector.ids', bad, 'a UUID');
    // Named one by one: whatever their state, within what the change applies to.
    return {
      filter: { includeRetrying: true, includeDiscarded: true },
      ids: (ids as string[]).map((id) => id.toLowerCase()),
    };
  }
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

function unwrap<T>(result: { ok: true; value: T } | { ok: false; error: Error }): T {
  if (!result.ok) throw result.error;
  return result.value;
}
