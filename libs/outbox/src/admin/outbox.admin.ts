import { Injectable, Logger, Optional } from '@nestjs/common';
import { DEAD_LETTERS_CURSOR } from '../store/admin/dead-letters.sql';
import {
  type DeadLetterChange,
  type DeadLetterSelector,
  type DiscardOptions,
  type ReplayOptions,
  type DeadLetterFilter,
  type DeadLetterGroup,
  type DeadLetterList,
  type DeadLetterPage,
  type OutboxEventDetail,
  type OutboxEventList,
  type OutboxEventsFilter,
  type OutboxEventsPage,
  type DispatcherInfo,
  type MinuteCount,
  type OutboxStatus,
} from '../store/admin/dead-letter.types';
import { type DeadLetterChangeBatch } from '../store/admin/dead-letter-changes.sql';
import { EVENTS_CURSOR } from '../store/admin/events.sql';
import { InvalidOutboxAdminQueryError } from '../outbox.errors';
import { isUuid } from '../common/uuid.util';
import { AdminStore } from '../store/admin/admin.store';
import { OutboxTelemetry } from '../telemetry/outbox.telemetry';
import { DISPATCHER_REPORT_MS } from '../engine/outbox.heartbeat';
import { checkEventsFilter, checkFilter, checkPage, checkSelector } from './admin-query.util';

const MAX_GROUPS = 100;
/** Rows per replay or discard statement: each batch is one short transaction. */
const CHANGE_BATCH = 500;
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
    private readonly store: AdminStore,
    @Optional() private readonly telemetry: OutboxTelemetry = new OutboxTelemetry(),
  ) {}

  /**
   * Exact counts by state and by type, and the lag. It reads every undelivered row (health
   * probes use the bounded `OutboxRepository.pendingState` instead).
   */
  async status(): Promise<OutboxStatus> {
    const [backlog, horizon] = await Promise.all([
      this.store.backlogByType(),
      this.store.horizon(),
    ]);
    const byType = unwrap(backlog);
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
      horizon: unwrap(horizon),
    };
  }

  /**
   * Every dispatcher that reports in (each running instance writes its state every 10 s), those
   * that stopped reporting included for a day, marked `reporting: false`.
   */
  async dispatchers(): Promise<DispatcherInfo[]> {
    const reports = unwrap(await this.store.listDispatchers());
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
    return unwrap(await this.store.throughput(minutes));
  }

  /** Dead (and with `includeRetrying`, retrying) events, newest first, by keyset pages. */
  async list(filter: DeadLetterFilter = {}, page: DeadLetterPage = {}): Promise<DeadLetterList> {
    checkFilter(filter);
    return unwrap(
      await this.store.listDeadLetters(filter, checkPage(page, DEAD_LETTERS_CURSOR, 'list')),
    );
  }

  /**
   * Events of any state (pending, retrying, in flight, delivered, dead, discarded) that match
   * every condition of `filter` (at least one), newest first by occurrence, by keyset pages of
   * `page.limit` (50 by default, at most 500). Each comes whole, with its `state`, deliveries and
   * failures per handler: what an app shows of the events it emitted (the reference app lists
   * its webhook deliveries with it) without reading the outbox's table. `ids` narrows to given
   * events, so `events({ types, organizationId, ids: [id] })` finds one event of an organization.
   */
  async events(filter: OutboxEventsFilter, page: OutboxEventsPage = {}): Promise<OutboxEventList> {
    checkEventsFilter(filter);
    return unwrap(await this.store.listEvents(filter, checkPage(page, EVENTS_CURSOR, 'events')));
  }

  /** Dead letters grouped by (type, failed handler, error fingerprint), largest first. */
  async groups(filter: DeadLetterFilter = {}): Promise<DeadLetterGroup[]> {
    checkFilter(filter);
    return unwrap(await this.store.groupDeadLetters(filter, MAX_GROUPS));
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
        await this.store.changeDeadLetters({
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
    return unwrap(await this.store.findEvent(id));
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

function unwrap<T>(result: { ok: true; value: T } | { ok: false; error: Error }): T {
  if (!result.ok) throw result.error;
  return result.value;
}
