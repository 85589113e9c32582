import { ok, type OutboxResult } from '../outbox.result';
import { ClientStore, type OutboxStoreOptions } from '../store.client';
import {
  CLAIM,
  CLAIM_FAIR_CALL,
  CLAIM_FUNCTIONS_PRESENT,
  CLAIM_LIVE,
  CLAIM_LIVE_CALL,
  claimParameters,
  fairClaimParameters,
  toRecords,
  type ClaimedRow,
} from './claim.sql';
import { ClaimFunction, UNDEFINED_FUNCTION } from './claim-function';
import { orderedDone, PARK, parkParameters } from '../ordering/ordered-settle.sql';
import type {
  ClaimOptions,
  DeliveredSettle,
  FailedSettle,
  LimitedSettle,
  MarkFailedOptions,
  NextDueOptions,
  OrderedSettleOptions,
  OutboxRecord,
  PendingState,
  PendingStateOptions,
  SettleOutcome,
  TypeFilterOptions,
} from './lease.types';
import { RELEASE, releaseParameters } from './release.sql';
import {
  BRING_DEAD_FORWARD,
  deadScheduleParameters,
  toDeadScheduleBatch,
  type DeadScheduleBatch,
  type DeadScheduleCursor,
} from './dead-schedule.sql';
import {
  MARK_DELIVERED,
  MARK_FAILED,
  MARK_LIMITED,
  markDeliveredParameters,
  markFailedParameters,
  markLimitedParameters,
} from './settle.sql';
import {
  EXACT_STATE,
  NEXT_DUE,
  nextDueParameters,
  PENDING_STATE,
  pendingStateParameters,
  toNextDue,
  toPendingState,
  typeParameters,
} from './state.sql';

export type OutboxLeaseStoreOptions = OutboxStoreOptions;

const DEFAULT_COUNT_LIMIT = 1000;

/**
 * The lease repository (the engine's store): claims due events under a lease, settles them
 * (delivered, failed, dead) guarded by the attempt each claim returned, gives unstarted claims
 * back, and reads when the next event is due and how many wait in each state. Database failures
 * come back as `{ ok: false, error }` with a scrubbed `OutboxStoreError`.
 */
export class OutboxLeaseStore extends ClientStore {
  private readonly claimFunction = new ClaimFunction(() =>
    this.client.run(
      'claim',
      CLAIM_FUNCTIONS_PRESENT,
      [],
      (rows: { chained: boolean; fair: boolean }[]) => ({
        chained: Boolean(rows[0]?.chained),
        fair: Boolean(rows[0]?.fair),
      }),
    ),
  );
  /**
   * Where the last fair claim's visit of the partitions stopped: the next one starts after it,
   * so partitions beyond one claim's visit take their turn. '' (before every partition) at first.
   */
  private fairAfter = '';

  /**
   * The longest a claim can take whatever the database does: it may look up the claim function
   * first, and each statement is bounded (see `StoreClient.longestStatementMs`).
   */
  get longestClaimMs(): number {
    return 2 * this.client.longestStatementMs;
  }

  /**
   * Leases due live rows, and due dead rows unless `includeDead` is false, for `leaseMs`. Claim
   * order is due order: the time each row became claimable, ties by id (time-ordered UUIDv7, so
   * occurrence order for generated ids); a live claim with `fair` shares the limit out across
   * partitions first (see `outbox_claim_fair_v1`).
   */
  async claim(options: ClaimOptions): Promise<OutboxResult<OutboxRecord[]>> {
    if (options.includeDead !== false) return this.runClaim(CLAIM, claimParameters(options));
    const functions = await this.claimFunction.use(options.fair === true);
    const fair = options.fair === true && functions.fair;
    const result = fair
      ? await this.runClaim(
          CLAIM_FAIR_CALL,
          fairClaimParameters(options, this.fairAfter),
          (rows) => {
            if (rows.length > 0) this.fairAfter = rows[0].visited ?? '';
          },
        )
      : await this.runClaim(
          functions.chained ? CLAIM_LIVE_CALL : CLAIM_LIVE,
          claimParameters(options),
        );
    if ((fair || functions.chained) && !result.ok && result.error.code === UNDEFINED_FUNCTION) {
      this.claimFunction.forget();
    }
    return result;
  }

  private runClaim(
    statement: string,
    parameters: unknown[],
    answered?: (rows: ClaimedRow[]) => void,
  ): Promise<OutboxResult<OutboxRecord[]>> {
    return this.client.run(
      'claim',
      statement,
      parameters,
      (rows: ClaimedRow[]) => {
        answered?.(rows);
        return toRecords(rows);
      },
      {
        // A claim lost in a server crash only makes its rows claimable again at once, which is
        // what a lease that never happened should mean; settles keep the server's durability.
        asyncCommit: true,
      },
    );
  }

  /** Marks rows delivered; rows whose attempt count moved on are reported stale and untouched. */
  async markDelivered(
    settles: readonly DeliveredSettle[],
    ordering?: OrderedSettleOptions,
  ): Promise<OutboxResult<SettleOutcome>> {
    if (settles.length === 0) return ok({ settled: [], stale: [] });
    return this.client.run(
      'markDelivered',
      withOrderedDone(MARK_DELIVERED, settles, ordering, this.client.channel),
      markDeliveredParameters(settles),
      (rows: { id: string }[]) => splitStale(settles, rows),
    );
  }

  /**
   * Records failed attempts: each failed handler's count and retry time (`failures`), and the
   * event due at the earliest retry of its `pending` handlers (or after `retryDelayMs`); or, when
   * the settle says `dead`, the dead state with one `outbox.event.dead` announcement written in
   * the same statement. A row that is or becomes dead is replayed after `deadRetryMs`. A row no
   * longer leased (already settled or given back for this attempt) is reported stale.
   */
  async markFailed(
    settles: readonly FailedSettle[],
    options: MarkFailedOptions,
  ): Promise<OutboxResult<SettleOutcome>> {
    if (settles.length === 0) return ok({ settled: [], stale: [], newlyDead: [] });
    return this.client.run(
      'markFailed',
      withOrderedDone(MARK_FAILED, settles, options.ordering, this.client.channel),
      markFailedParameters(settles, options, this.client.channel),
      (rows: { id: string; becomes_dead: boolean; retry_at: Date | null }[]) => ({
        ...splitStale(settles, rows),
        newlyDead: rows.filter((row) => row.becomes_dead).map((row) => row.id),
        retryFrom: earliest(rows.map((row) => row.retry_at)),
      }),
    );
  }

  /**
   * Settles attempts whose limited handlers were held back by their limit (see `MARK_LIMITED`):
   * due again at `dueAt`, the attempt given back, `failures` untouched. A row no longer under
   * this claim is reported stale.
   */
  async markLimited(
    settles: readonly LimitedSettle[],
    ordering?: OrderedSettleOptions,
  ): Promise<OutboxResult<SettleOutcome>> {
    if (settles.length === 0) return ok({ settled: [], stale: [] });
    return this.client.run(
      'markLimited',
      withOrderedDone(MARK_LIMITED, settles, ordering, this.client.channel),
      markLimitedParameters(settles),
      (rows: { id: string; retry_at: Date }[]) => ({
        ...splitStale(settles, rows),
        retryFrom: earliest(rows.map((row) => row.retry_at)),
      }),
    );
  }

  /**
   * Settles events whose handlers left are all held by an earlier event of their key (ordered
   * handlers): parked until that event is done, or due now when it was done meanwhile. Handlers
   * that ran are recorded delivered. A row no longer leased for this attempt is reported stale.
   */
  async park(
    settles: readonly DeliveredSettle[],
    ordering: OrderedSettleOptions,
  ): Promise<OutboxResult<SettleOutcome>> {
    if (settles.length === 0) return ok({ settled: [], stale: [] });
    return this.client.run(
      'park',
      PARK,
      parkParameters(settles, ordering, this.client.channel),
      (rows: { id: string }[]) => splitStale(settles, rows),
    );
  }

  /**
   * Gives back claimed rows whose handlers never started, so another instance can take them at
   * once; the attempt that never ran is not counted.
   */
  async release(
    claims: readonly { id: string; attempts: number }[],
  ): Promise<OutboxResult<SettleOutcome>> {
    if (claims.length === 0) return ok({ settled: [], stale: [] });
    return this.client.run(
      'release',
      RELEASE,
      releaseParameters(claims, this.client.channel),
      (rows: { id: string }[]) => splitStale(claims, rows),
    );
  }

  /**
   * Milliseconds until the earliest unsettled row (live or dead) is due: 0 when one is due now,
   * null when nothing is unsettled. Two index probes, whatever the backlog.
   */
  /**
   * One batch of dead rows brought forward to the running dead retry (see `BRING_DEAD_FORWARD`),
   * after `after`; the batch's `next` cursor is null once there is nothing more to look at.
   */
  async bringDeadForward(
    options: MarkFailedOptions & TypeFilterOptions,
    after: DeadScheduleCursor | null,
    limit: number,
  ): Promise<OutboxResult<DeadScheduleBatch>> {
    return this.client.run(
      'bringDeadForward',
      BRING_DEAD_FORWARD,
      deadScheduleParameters(options, after, limit),
      (rows: Parameters<typeof toDeadScheduleBatch>[0]) => toDeadScheduleBatch(rows, limit),
    );
  }

  async nextDue(options: NextDueOptions = {}): Promise<OutboxResult<number | null>> {
    return this.client.run('nextDue', NEXT_DUE, nextDueParameters(options), toNextDue);
  }

  /**
   * When the next row is due, how long the oldest due row has waited, and counts by state, at a
   * cost that does not grow with the backlog: each count reads at most `countLimit` index
   * entries (default 1000) and stops there, so a count equal to `countLimit` means "at least".
   */
  async pendingState(options: PendingStateOptions = {}): Promise<OutboxResult<PendingState>> {
    const countLimit = options.countLimit ?? DEFAULT_COUNT_LIMIT;
    if (!Number.isSafeInteger(countLimit) || countLimit < 1) {
      throw new RangeError(
        `pendingState: countLimit must be a positive integer, got ${countLimit}`,
      );
    }
    return this.client.run(
      'pendingState',
      PENDING_STATE,
      pendingStateParameters(options, countLimit),
      toPendingState(countLimit),
    );
  }

  /**
   * `pendingState` with exact counts (`countLimit` null), for an admin page. It scans every
   * unsettled row, so its cost grows with the backlog: keep it off probes and hot paths.
   */
  async exactState(options: TypeFilterOptions = {}): Promise<OutboxResult<PendingState>> {
    return this.client.run(
      'exactState',
      EXACT_STATE,
      typeParameters(options),
      toPendingState(null),
    );
  }

  /**
   * Gives up on every statement of the repository's own still waiting for an answer (see
   * `StoreClient.abandonInFlight`): rows whose settle was lost keep their lease and are claimed
   * again after it.
   */
  abandonInFlight(): void {
    this.client.abandonInFlight();
  }
}

function earliest(times: readonly (Date | null)[]): number | null {
  let soonest: number | null = null;
  for (const time of times) {
    if (time !== null && (soonest === null || time.getTime() < soonest)) soonest = time.getTime();
  }
  return soonest;
}

function splitStale(
  settles: readonly { id: string }[],
  written: readonly { id: string }[],
): SettleOutcome {
  const settledIds = new Set(written.map((row) => row.id));
  return {
    settled: settles.filter((s) => settledIds.has(s.id)).map((s) => s.id),
    stale: settles.filter((s) => !settledIds.has(s.id)).map((s) => s.id),
  };
}

/** A settle followed, for an app with ordered handlers, by what it frees (see `orderedDone`). */
function withOrderedDone(
  statement: string,
  settles: readonly { id: string }[],
  ordering: OrderedSettleOptions | undefined,
  channel: string,
): string {
  if (!ordering) return statement;
  return `${statement};\n${orderedDone(
    settles.map((s) => s.id),
    ordering,
    channel,
  )}`;
}
