import type { OutboxResult } from '../outbox.result';
import { ClientStore } from '../store.client';
import {
  DISCARD_SELECTED,
  REPLAY_SELECTED,
  changeParameters,
  type DeadLetterChangeBatch,
} from './dead-letter-changes.sql';
import {
  CHANGE_SCOPE,
  CLAIM_CHANGE,
  RELEASE_CHANGE,
  toClaim,
  type ChangeClaim,
} from './change-claim.sql';
import {
  BLOCKED_KEYS,
  blockedKeysParameters,
  toBlockedKeys,
  type BlockedKeysQuery,
} from './blocked-keys.sql';
import type {
  BlockedKeyList,
  DeadLetterFilter,
  DeadLetterGroup,
  DeadLetterList,
} from './dead-letter.types';
import type { OutboxEventDetail, OutboxEventList, OutboxEventsFilter } from './event.types';
import type { HandlerLimitState, MinuteCount, TypeBacklog } from './status.types';
import { LIMIT_STATES, toLimitStates } from './handler-limits.sql';
import type { KeysetPage } from './keyset-cursor.util';
import {
  GROUP_DEAD_LETTERS,
  groupParameters,
  listDeadLettersStatement,
  listParameters,
  toDeadLetterList,
  toGroups,
} from './dead-letters.sql';
import { FIND_EVENT, findEventParameters, toDetail } from './event-detail.sql';
import { eventsParameters, listEventsStatement, readsPerType, toEventList } from './events.sql';
import {
  BACKLOG_BY_TYPE,
  LIST_INSTANCES,
  THROUGHPUT,
  throughputParameters,
  toBacklog,
  toInstances,
  toMinuteCounts,
  type ReportedInstance,
} from './status.sql';
import {
  PARTITION_BACKLOG,
  partitionBacklogParameters,
  toPartitionBacklog,
  type PartitionBacklogRead,
} from './partition-backlog.sql';
import { HORIZON, toHorizon, type HorizonRow, type OutboxHorizon } from '../horizon.sql';

/** Time a change's claim outlasts the longest the change can run: clocks, a slow release. */
const CLAIM_MARGIN_MS = 30_000;

/**
 * After a discard, in its transaction: the discarded events are done for their ordered handlers,
 * so the next event of each key runs (see `outbox_ordered_done_v1`). The rows discarded by this
 * transaction are those whose discard time is its `now()` (found on `outbox_event_discarded_idx`). $18: the channel of
 * `changeParameters`, woken for the events made due.
 */
const FREE_DISCARDED_KEYS = `
  SELECT outbox_ordered_done_v1(
    ARRAY(SELECT id FROM outbox_event
          WHERE dispatched_at IS NULL AND discarded_at = now() AND ordered_for <> '{}'),
    '{}'::text[],
    $18::text)`;

/**
 * `OutboxAdmin`'s store: dead letters listed, grouped and changed, events listed by type and
 * organization, one event whole, the backlog by type, throughput and the instances that report
 * in. Reads that scan grow with the backlog; each is bounded by the statement timeout.
 */
export class AdminStore extends ClientStore {
  /** A page of dead letters (see `listDeadLettersStatement`), and the cursor of the next one. */
  async listDeadLetters(
    filter: DeadLetterFilter,
    page: KeysetPage,
  ): Promise<OutboxResult<DeadLetterList>> {
    return this.client.run(
      'listDeadLetters',
      listDeadLettersStatement(filter.includeRetrying ?? false),
      listParameters(filter, page),
      toDeadLetterList(page.limit),
    );
  }

  /** Dead letters grouped by type, failed handler and error fingerprint, largest first. */
  async groupDeadLetters(
    filter: DeadLetterFilter,
    limit: number,
  ): Promise<OutboxResult<DeadLetterGroup[]>> {
    return this.client.run(
      'groupDeadLetters',
      GROUP_DEAD_LETTERS,
      groupParameters(filter, limit),
      toGroups,
    );
  }

  /** A page of keys blocked for ordered handlers by a dead head (see `BLOCKED_KEYS`). */
  async blockedKeys(query: BlockedKeysQuery): Promise<OutboxResult<BlockedKeyList>> {
    return this.client.run(
      'blockedKeys',
      BLOCKED_KEYS,
      blockedKeysParameters(query),
      toBlockedKeys(query.limit),
    );
  }

  /** The partitions with due first tries (see `PARTITION_BACKLOG`). */
  async partitionBacklog(): Promise<OutboxResult<PartitionBacklogRead>> {
    return this.client.run(
      'partitionBacklog',
      PARTITION_BACKLOG,
      partitionBacklogParameters(),
      toPartitionBacklog,
      { byIndexOrder: true },
    );
  }

  /** The handlers' limits across processes, busiest first, at most `top` (see `LIMIT_STATES`). */
  async limitStates(top: number): Promise<OutboxResult<HandlerLimitState[]>> {
    return this.client.run('limitStates', LIMIT_STATES, [top], toLimitStates);
  }

  /** One event whole, or null when there is none with this id. */
  async findEvent(id: string): Promise<OutboxResult<OutboxEventDetail | null>> {
    return this.client.run('findEvent', FIND_EVENT, findEventParameters(id), toDetail);
  }

  /** A page of events whatever their state (see `listEventsStatement`), and the next cursor. */
  async listEvents(
    filter: OutboxEventsFilter,
    page: KeysetPage,
  ): Promise<OutboxResult<OutboxEventList>> {
    return this.client.run(
      'listEvents',
      listEventsStatement(readsPerType(filter)),
      eventsParameters(filter, page),
      toEventList(page.limit),
    );
  }

  /**
   * One batch of `OutboxAdmin.replay` or `discard` (a discard also frees the keys its events
   * held for ordered handlers): the rows that `filter` and `ids` select
   * after `afterId` (by id), at most `limit`, changed unless `dryRun`, each change recorded as an
   * `outbox.event.replayed` / `outbox.event.discarded` event in the same statement. Returns the
   * selected ids in order, each with whether it changed.
   */
  async changeDeadLetters(
    batch: DeadLetterChangeBatch,
  ): Promise<OutboxResult<{ id: string; type: string; changed: boolean }[]>> {
    const replay = batch.change.kind === 'replay';
    return this.client.run(
      replay ? 'replayDeadLetters' : 'discardDeadLetters',
      replay ? REPLAY_SELECTED : `${DISCARD_SELECTED};\n${FREE_DISCARDED_KEYS}`,
      changeParameters(batch, this.client.channel),
      (rows: { id: string; type: string; changed: boolean }[]) =>
        rows.map((row) => ({ id: row.id, type: row.type, changed: row.changed })),
    );
  }

  /**
   * Claims the one change by filter that may run (see `CLAIM_CHANGE`), for as long as a change
   * of `timeBudgetMs` can run: its budget, the longest its last batch can take once started, and
   * a margin. A change that ends releases it sooner; one whose process died, at that time.
   */
  async claimChange(
    change: { changeId: string; kind: string; actor: string | null; selection: unknown },
    timeBudgetMs: number,
  ): Promise<OutboxResult<ChangeClaim>> {
    const holdMs = timeBudgetMs + this.client.longestStatementMs + CLAIM_MARGIN_MS;
    return this.client.run(
      'claimAdminChange',
      CLAIM_CHANGE,
      [
        CHANGE_SCOPE,
        change.changeId,
        change.kind,
        change.actor,
        JSON.stringify(change.selection),
        holdMs,
      ],
      toClaim,
    );
  }

  /** Ends a change's claim (see `RELEASE_CHANGE`). */
  async releaseChange(changeId: string): Promise<OutboxResult<void>> {
    return this.client.run('releaseAdminChange', RELEASE_CHANGE, [changeId], () => undefined);
  }

  /** The xmin horizon on the outbox's database (see `OutboxHorizon`). */
  async horizon(): Promise<OutboxResult<OutboxHorizon>> {
    return this.client.run('horizon', HORIZON, [], ([row]: HorizonRow[]) => toHorizon(row));
  }

  /** Undelivered events by type and state (see `BACKLOG_BY_TYPE`); grows with the backlog. */
  async backlogByType(): Promise<OutboxResult<TypeBacklog[]>> {
    return this.client.run('backlogByType', BACKLOG_BY_TYPE, [], toBacklog);
  }

  /** Events delivered per minute over the last `minutes` minutes (see `THROUGHPUT`). */
  async throughput(minutes: number): Promise<OutboxResult<MinuteCount[]>> {
    return this.client.run('throughput', THROUGHPUT, throughputParameters(minutes), toMinuteCounts);
  }

  /** Every instance's last report, and how long ago it came. */
  async listInstances(): Promise<OutboxResult<ReportedInstance[]>> {
    return this.client.run('listInstances', LIST_INSTANCES, [], toInstances);
  }
}
