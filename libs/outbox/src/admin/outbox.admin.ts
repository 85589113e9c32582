import { randomUUID } from 'node:crypto';
import { Injectable, Logger, Optional } from '@nestjs/common';
import { DEAD_LETTERS_CURSOR } from '../store/admin/dead-letters.sql';
import { BLOCKED_KEYS_CURSOR } from '../store/admin/blocked-keys.sql';
import {
  type BlockedKeyList,
  type BlockedKeysFilter,
  type ChangeBounds,
  type DeadLetterChange,
  type DeadLetterSelector,
  type DiscardOptions,
  type ReplayOptions,
  type DeadLetterFilter,
  type DeadLetterGroup,
  type DeadLetterList,
  type DeadLetterPage,
} from '../store/admin/dead-letter.types';
import {
  type OutboxEventDetail,
  type OutboxEventList,
  type OutboxEventsFilter,
  type OutboxEventsPage,
} from '../store/admin/event.types';
import {
  type MinuteCount,
  type OutboxInstanceInfo,
  type OutboxStatus,
  type PartitionBacklog,
  type PartitionBacklogTop,
  type HandlerLimitState,
} from '../store/admin/status.types';
import { type DeadLetterChangeBatch } from '../store/admin/dead-letter-changes.sql';
import { EVENTS_CURSOR } from '../store/admin/events.sql';
import { InvalidOutboxAdminQueryError, OutboxAdminChangeInProgressError } from '../outbox.errors';
import { isUuid } from '../common/uuid.util';
import { AdminStore } from '../store/admin/admin.store';
import { OutboxTelemetry } from '../telemetry/outbox.telemetry';
import { INSTANCE_REPORT_MS } from '../engine/outbox.heartbeat';
import {
  checkBlockedKeysFilter,
  checkEventsFilter,
  checkFilter,
  checkPage,
  checkSelector,
} from './admin-query.util';
import { checkChangeBounds } from './change-bounds.util';
import { changeInBatches } from './change-batches';

const MAX_GROUPS = 100;
const MAX_TEXT = 500;
/** SQLSTATE of a statement on a table the database does not have. */
const UNDEFINED_TABLE = '42P01';

/**
 * What an operator needs to see of events that failed, without SQL: dead letters page by page,
 * grouped so one outage reads as one line, and one event whole. The CLI and the dashboard read
 * through it. Every query is bounded by the repository's statement timeout; a store failure
 * throws its scrubbed `OutboxStoreError`, bad input an `InvalidOutboxAdminQueryError` naming the
 * field, before anything is sent.
 *
 * `replay` and `discard` change events in batches of 500 rows, each one statement that also
 * records every change as an event (`outbox.event.replayed`, `outbox.event.discarded`) for audit
 * handlers. By filter, one call stops at `maxRows` events (10,000) or its time budget (10 s),
 * answers how many of each type it changed, a sample of ids and a `cursor` to go on with, and
 * only one such change runs at a time across every process (`OutboxAdminChangeInProgressError`
 * for a second). A failure part way leaves the batches before it done; running the same call
 * again finishes the work (a discard skips what it already discarded).
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
   * probes use the bounded `OutboxLeaseStore.pendingState` instead).
   */
  async status(): Promise<OutboxStatus> {
    const [backlog, horizon] = await Promise.all([
      this.store.backlogByType(),
      this.store.horizon(),
    ]);
    const byType = unwrap(backlog);
    const total = (
      field: 'due' | 'retrying' | 'inFlight' | 'expiredLeases' | 'parked' | 'dead' | 'discarded',
    ) => byType.reduce((sum, t) => sum + t[field], 0);
    const known = (values: (number | null)[]) => values.filter((v): v is number => v !== null);
    const waits = known(byType.map((t) => t.oldestDueWaitMs));
    const dues = known(byType.map((t) => t.nextDueInMs));
    return {
      due: total('due'),
      retrying: total('retrying'),
      inFlight: total('inFlight'),
      expiredLeases: total('expiredLeases'),
      parked: total('parked'),
      dead: total('dead'),
      discarded: total('discarded'),
      lagMs: waits.length > 0 ? Math.max(...waits) : null,
      nextDueInMs: dues.length > 0 ? Math.min(...dues) : null,
      byType,
      horizon: unwrap(horizon),
    };
  }

  /**
   * Every running instance of the engine that reports in (each writes its state every 10 s),
   * those that stopped reporting included for a day, marked `reporting: false`.
   */
  async instances(): Promise<OutboxInstanceInfo[]> {
    const reports = unwrap(await this.store.listInstances());
    return reports.map(({ silentMs, ...report }) => ({
      ...report,
      reporting: silentMs < 3 * INSTANCE_REPORT_MS,
    }));
  }

  /** @deprecated Renamed `instances()`: the running instances of the engine. */
  async dispatchers(): Promise<OutboxInstanceInfo[]> {
    return this.instances();
  }

  /** Events delivered in each of the last `minutes` minutes (1 to 1440, default 60), oldest first. */
  async throughput(minutes = 60): Promise<MinuteCount[]> {
    if (!Number.isSafeInteger(minutes) || minutes < 1 || minutes > 1440) {
      throw new InvalidOutboxAdminQueryError('minutes', minutes, 'an integer from 1 to 1440');
    }
    return unwrap(await this.store.throughput(minutes));
  }

  /**
   * Who floods: the `top` partitions (1 to 100, default 10) with the most due events, and with
   * the oldest, among the partitions fair claims share out (see `OutboxFairnessOptions`). Counts
   * first tries waiting for a claim (retries are in `status()`), each up to 10,000, over at most
   * the first 1,000 partitions with one (`complete` says whether that was all): its cost follows
   * the partitions with work, not the backlog.
   */
  async partitions(top = 10): Promise<PartitionBacklogTop> {
    if (!Number.isSafeInteger(top) || top < 1 || top > 100) {
      throw new InvalidOutboxAdminQueryError('top', top, 'an integer from 1 to 100');
    }
    const { partitions, complete } = unwrap(await this.store.partitionBacklog());
    const by = (order: (a: PartitionBacklog, b: PartitionBacklog) => number) =>
      [...partitions].sort(order).slice(0, top);
    return {
      byDue: by((a, b) => b.due - a.due || b.oldestDueWaitMs - a.oldestDueWaitMs),
      byOldest: by((a, b) => b.oldestDueWaitMs - a.oldestDueWaitMs || b.due - a.due),
      partitions: partitions.length,
      complete,
    };
  }

  /**
   * Held by limit: each limited handler's limit across processes (`maxConcurrent`, `rate`, per
   * partition with `limitPerPartition`), busiest first, at most `top` (1 to 100, default 20):
   * runs in flight, admissions in the rate's window, runs held back so far on every instance,
   * and when the last one held back is due. None before the limits' migration has run.
   */
  async limits(top = 20): Promise<HandlerLimitState[]> {
    if (!Number.isSafeInteger(top) || top < 1 || top > 100) {
      throw new InvalidOutboxAdminQueryError('top', top, 'an integer from 1 to 100');
    }
    const states = await this.store.limitStates(top);
    // Before migration OutboxHandlerLimits1776000000000 no handler can have been limited.
    if (!states.ok && states.error.code === UNDEFINED_TABLE) return [];
    return unwrap(states);
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
   * Keys that an ordered handler (`onDead: 'block'`) cannot go on with because their head event
   * is dead for it, oldest first, by keyset pages of `limit` (50 by default, at most 500); each
   * with how many events of the key wait behind the head. `replay({ ids: [eventId] })` unblocks
   * the key once the head is delivered; `discard` unblocks it at once.
   */
  async blockedKeys(filter: BlockedKeysFilter = {}): Promise<BlockedKeyList> {
    return unwrap(
      await this.store.blockedKeys(checkBlockedKeysFilter(filter, BLOCKED_KEYS_CURSOR)),
    );
  }

  /**
   * Makes the selected dead events due now, discarded ones included (they are restored): the
   * next claim runs every handler that has not delivered them, or only those in `rerun`. Events under
   * a lease (a relay is running them) are left alone. Each changed event is recorded as an
   * `outbox.event.replayed` event with the handlers and the actor.
   */
  async replay(
    selector: DeadLetterSelector,
    options: ReplayOptions = {},
  ): Promise<DeadLetterChange> {
    const handlers = rerunOf(options);
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
    options: ChangeBounds & { dryRun?: boolean; actor?: string },
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
    const bounds = checkChangeBounds(options, ids === null);
    const run = () =>
      changeInBatches(this.store, this.telemetry, { change, filter, ids, bounds, dryRun, actor });
    // A dry run changes nothing, and ids bound their change: neither claims.
    const result =
      bounds && !dryRun
        ? await this.claimed(change, filter, actor, bounds.timeBudgetMs, run)
        : await run();
    if (!dryRun && result.count > 0) this.logChange(change.kind, result, actor);
    return result;
  }

  /**
   * Runs `work`, a change by filter, while it holds the one claim of `outbox_admin_change`;
   * refused with an `OutboxAdminChangeInProgressError` while another holds it. A row, not an
   * advisory lock: a session lock would need one connection held for the whole change, which a
   * pooler in transaction mode (PgBouncer) does not give, and a transaction lock covers a single
   * batch. Any two filters may select the same events, so any two changes by filter are taken to
   * overlap. The claim lasts as long as the change can (see `AdminStore.claimChange`), so that of
   * a process that died frees itself; a change that ends releases it at once.
   */
  private async claimed(
    change: DeadLetterChangeBatch['change'],
    filter: DeadLetterFilter,
    actor: string | undefined,
    timeBudgetMs: number,
    work: () => Promise<DeadLetterChange>,
  ): Promise<DeadLetterChange> {
    const changeId = randomUUID();
    const claim = unwrap(
      await this.store.claimChange(
        { changeId, kind: change.kind, actor: actor ?? null, selection: { filter, ...change } },
        timeBudgetMs,
      ),
    );
    if (!claim.claimed) throw new OutboxAdminChangeInProgressError(change.kind, claim.holder);
    try {
      return await work();
    } finally {
      const released = await this.store.releaseChange(changeId);
      if (!released.ok) {
        this.logger.warn(
          `Outbox could not end the claim of its ${change.kind} by filter; it ends by itself ` +
            `when it expires: ${released.error.message}`,
        );
      }
    }
  }

  /** An operator's change, in the logs (the events themselves record each). */
  private logChange(
    kind: 'replay' | 'discard',
    change: DeadLetterChange,
    actor: string | undefined,
  ) {
    const verb = kind === 'replay' ? 'replayed' : 'discarded';
    const stopped = change.stoppedBy ? `; stopped at ${change.stoppedBy}, more may remain` : '';
    this.logger.log(
      `Outbox ${verb} ${change.count} events by ${actor ?? 'an unnamed actor'}: ` +
        `${countByType(change.countsByType)}${stopped}`,
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
function countByType(counts: Record<string, number>): string {
  return Object.entries(counts)
    .sort((a, b) => b[1] - a[1])
    .map(([type, n]) => `${type} (${n})`)
    .join(', ');
}

function unwrap<T>(result: { ok: true; value: T } | { ok: false; error: Error }): T {
  if (!result.ok) throw result.error;
  return result.value;
}

/** The handlers a replay reruns, from `rerun` or its former name `handlers`, checked. */
function rerunOf(options: ReplayOptions): readonly string[] | undefined {
  const { rerun, handlers } = options;
  if (rerun !== undefined && handlers !== undefined) {
    throw new InvalidOutboxAdminQueryError(
      'options.handlers',
      handlers,
      'absent when options.rerun is given (handlers is the former name of rerun)',
    );
  }
  const field = rerun !== undefined ? 'options.rerun' : 'options.handlers';
  const names = rerun ?? handlers;
  if (
    names !== undefined &&
    (!Array.isArray(names) ||
      names.length === 0 ||
      names.some((h) => typeof h !== 'string' || h.length === 0))
  ) {
    throw new InvalidOutboxAdminQueryError(field, names, 'a non-empty list of handler names');
  }
  return names;
}
