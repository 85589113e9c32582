import { handlerRetryDelayMs, type HandlerPolicy } from '../handlers/handler.policy';
import type { HandlerOutcome } from '../handlers/outbox-handler.types';
import { isHeld, type HeldByLimit, type RunOutcome } from '../handlers/handler-limits';
import type { OutboxRecord } from '../store/lease/lease.types';
import { scrubError } from '../common/scrub-error.util';
import type { Settle } from './settle-statements';

/**
 * The settle plan of one claimed event, by the per-handler rule: which of its handlers run now
 * (`handlersToRun`), and what to write once they have (`planSettle`). No I/O and no clock but
 * the one handed in, so every policy × outcome × attempt × lease case is a row of a table
 * (`settle-plan.spec.ts`). The executor looks the event's handlers up once and passes the same
 * list to both.
 *
 * "Now" is the claim's own database clock (`record.claimedAt`): retry times are written by the
 * database, so comparing them with the local clock would drift.
 */

/** A handler of the event, as the plan sees it: its name and its retry policy. */
export interface PlannedHandler {
  readonly name: string;
  readonly policy: HandlerPolicy;
}

type Failed = Extract<HandlerOutcome, { ok: false }>;

/** How long a run waits whose limit could not be asked (the database failed). */
export const UNASKED_LIMIT_RETRY_MS = 1000;

/**
 * The handlers this claim runs, in their registered order. Left out: those already delivered
 * and, unless the event is a dead replay (which gives every handler left one more try), those
 * whose own retry time has not come or whose attempts are used up. A dead replay that
 * `OutboxAdmin.replay` narrowed to some handlers has marked them, alone, with a retry time: it
 * runs those. Ordered handlers an earlier event of the key holds (`held`) never run now.
 */
export function handlersToRun<H extends PlannedHandler>(
  record: OutboxRecord,
  handlers: readonly H[],
): readonly H[] {
  const { deliveries, failures, held } = record;
  // Most events are on their first try: nothing delivered, nothing failed, nothing held.
  if (!record.deadAt && isEmpty(failures) && held.length === 0) {
    return isEmpty(deliveries)
      ? handlers
      : handlers.filter((h) => !Object.hasOwn(deliveries, h.name));
  }
  const waits = record.deadAt ? replayWaits(record) : retryWaits(record);
  return handlers.filter(
    (h) => !Object.hasOwn(deliveries, h.name) && !held.includes(h.name) && !waits(h.name),
  );
}

/** A dead replay: the handlers `replay` marked run, or every one left when none is marked. */
function replayWaits(record: OutboxRecord): (name: string) => boolean {
  const marked = new Set(
    Object.entries(record.failures)
      .filter(([name, f]) => f.retryAt !== null && !Object.hasOwn(record.deliveries, name))
      .map(([name]) => name),
  );
  return marked.size === 0 ? () => false : (name) => !marked.has(name);
}

/** A live retry: a failed handler waits for its own retry time, or for ever once used up. */
function retryWaits(record: OutboxRecord): (name: string) => boolean {
  const claimedAt = record.claimedAt.getTime();
  return (name) => {
    const retryAt = ownFailure(record, name)?.retryAt;
    if (retryAt === undefined) return false;
    return retryAt === null || Date.parse(retryAt) > claimedAt;
  };
}

/**
 * Whether the claim's run (`toRun`, see `handlersToRun`) settles the event itself: its one
 * handler is transactional and every other handler of the event is already delivered, so the
 * handler's delivery record, in its own commit, marks the event delivered as `planSettle` would
 * on its success. Not for an event placed for ordered handlers: its settle tells its key.
 */
export function settledByHandler(
  record: OutboxRecord,
  handlers: readonly TransactionalAware[],
  toRun: readonly TransactionalAware[],
): boolean {
  if (toRun.length !== 1 || toRun[0].isolationLevel === undefined || record.sequenced) {
    return false;
  }
  return handlers.every((h) => h === toRun[0] || Object.hasOwn(record.deliveries, h.name));
}

/** A handler as `settledByHandler` sees it: set `isolationLevel` for a transactional one. */
interface TransactionalAware extends PlannedHandler {
  readonly isolationLevel: unknown;
}

/**
 * The settle of an attempt. Each failed handler counts one more failure and, below its
 * `maxAttempts`, gets its next try from its own retry schedule. The event is delivered once
 * every handler is; held (parked) when all it has left are ordered handlers held by an earlier
 * event of the key; dead once every handler left has used its attempts (a dead replay that fails
 * stays dead); otherwise due at the earliest next try of the handlers still retrying.
 *
 * `outcomes` are those of `handlersToRun(record, handlers)`; `elapsedMs` is the local time since
 * the claim was sent, which turns a stored retry time into a delay from now.
 */
export function planSettle(
  record: OutboxRecord,
  handlers: readonly PlannedHandler[],
  outcomes: readonly RunOutcome[],
  elapsedMs: number,
): Settle {
  const { id, attempts } = record;
  // The common end: a first try on which every handler succeeded.
  if (outcomes.length === handlers.length && outcomes.every((o) => o.ok)) {
    const delivered = outcomes.map((o) => o.handlerName);
    return { kind: 'delivered', record, settle: { id, attempts, handlers: delivered } };
  }
  const limited = outcomes.filter(isHeld);
  const ran = limited.length === 0 ? outcomes : outcomes.filter((o) => !isHeld(o));
  const succeeded = ran.filter((o) => o.ok).map((o) => o.handlerName);
  const failed = ran.filter((o): o is Failed => !o.ok);
  const delivered = new Set([...Object.keys(record.deliveries), ...succeeded]);
  const left = handlers.filter((h) => !delivered.has(h.name));
  if (left.length === 0) {
    return { kind: 'delivered', record, settle: { id, attempts, handlers: succeeded } };
  }
  const limitRoomAt = limited.length === 0 ? Infinity : roomAt(record, limited, elapsedMs);
  if (limited.length > 0 && failed.length === 0) {
    // Neither a failure nor an attempt: due again when the limit has room, or at the retry of a
    // handler waiting for one, whichever comes first.
    const dueAt = Math.min(limitRoomAt, soonestRetryAt(record, left, limited));
    const retryDelayMs = Math.max(0, dueAt - record.claimedAt.getTime() - elapsedMs);
    return {
      kind: 'limited',
      record,
      settle: {
        id,
        attempts,
        handlers: succeeded,
        dueAt: new Date(dueAt),
        retryDelayMs,
        leaseExpiresAt: record.leaseExpiresAt,
      },
    };
  }
  if (failed.length === 0 && onlyHeldLeft(record, left)) {
    return { kind: 'held', record, settle: { id, attempts, handlers: succeeded } };
  }
  const failedNames = new Set(failed.map((f) => f.handlerName));
  const failures = handlers
    .filter((h) => failedNames.has(h.name))
    .map(({ name, policy }) => {
      const count = (ownFailure(record, name)?.count ?? 0) + 1;
      const usedUp = record.deadAt !== null || count >= policy.maxAttempts;
      return { handler: name, count, delayMs: usedUp ? null : handlerRetryDelayMs(policy, count) };
    });
  const updated = new Map(failures.map((f) => [f.handler, f]));
  const pending = left
    .filter((h) => {
      const update = updated.get(h.name);
      return update ? update.delayMs !== null : ownFailure(record, h.name)?.retryAt !== null;
    })
    .map((h) => h.name);
  const dead = record.deadAt ? failed.length > 0 : pending.length === 0;
  // A handler held by its limit has no retry time of its own: the event comes back for it when
  // its limit has room, or sooner for a handler that failed.
  const heldNames = new Set(limited.map((o) => o.handlerName));
  const retrying = heldNames.size === 0 ? pending : pending.filter((name) => !heldNames.has(name));
  const limitDelayMs = limitRoomAt - record.claimedAt.getTime() - elapsedMs;
  return {
    kind: 'failed',
    record,
    settle: {
      id,
      attempts,
      handlers: succeeded,
      failedHandlers: dead ? left.map((h) => h.name) : failed.map((f) => f.handlerName),
      error:
        failed.length === 0
          ? null
          : failed.map((f) => `${f.handlerName}: ${scrubError(f.error)}`).join('; '),
      retryDelayMs: orNow(
        Math.min(soonestRetryMs(record, failures, retrying, elapsedMs), limitDelayMs),
      ),
      failures,
      pending: retrying,
      dead,
      ...(limitRoomAt === Infinity ? {} : { limitRoomAt: new Date(limitRoomAt) }),
    },
  };
}

/**
 * When the first of the handlers held by their limit may run (epoch ms, database clock): the
 * limit's answer, or a moment after now when it could not be asked.
 */
function roomAt(record: OutboxRecord, limited: readonly HeldByLimit[], elapsedMs: number): number {
  let soonest = Infinity;
  for (const { heldUntil } of limited) {
    const at =
      heldUntil?.getTime() ?? record.claimedAt.getTime() + elapsedMs + UNASKED_LIMIT_RETRY_MS;
    soonest = Math.min(soonest, at);
  }
  return soonest;
}

/**
 * The earliest retry time still ahead of the claim among `left` handlers that did not run for
 * it (epoch ms), or Infinity. Not a held handler's: its last retry time has passed.
 */
function soonestRetryAt(
  record: OutboxRecord,
  left: readonly PlannedHandler[],
  limited: readonly HeldByLimit[],
): number {
  const claimedAt = record.claimedAt.getTime();
  let soonest = Infinity;
  for (const handler of left) {
    if (limited.some((o) => o.handlerName === handler.name)) continue;
    const retryAt = ownFailure(record, handler.name)?.retryAt;
    const at = retryAt ? Date.parse(retryAt) : Infinity;
    if (at > claimedAt) soonest = Math.min(soonest, at);
  }
  return soonest;
}

/** Each handler's attempt number: one past its failures, 1 (absent) for the others. */
export function handlerAttempts(record: OutboxRecord): Record<string, number> | undefined {
  if (isEmpty(record.failures)) return undefined;
  const attempts: Record<string, number> = {};
  for (const [name, failure] of Object.entries(record.failures)) attempts[name] = failure.count + 1;
  return attempts;
}

/**
 * Whether the handlers `left` that may still run are all held by an earlier event of the key,
 * so the event waits for it (parked) rather than coming back at once. A handler that used its
 * attempts on a live event runs no more, and holds nothing up.
 */
function onlyHeldLeft(record: OutboxRecord, left: readonly PlannedHandler[]): boolean {
  if (record.held.length === 0) return false;
  const runnable = record.deadAt
    ? left
    : left.filter((h) => ownFailure(record, h.name)?.retryAt !== null);
  return runnable.length > 0 && runnable.every((h) => record.held.includes(h.name));
}

/** A delay to write: none known (Infinity) is now, as none is never negative. */
function orNow(delayMs: number): number {
  return delayMs === Infinity ? 0 : Math.max(0, delayMs);
}

/**
 * When the event is next due, as a delay from now (Infinity when no handler has a time): for
 * logs and for planning the next wake.
 */
function soonestRetryMs(
  record: OutboxRecord,
  failures: readonly { handler: string; delayMs: number | null }[],
  pending: readonly string[],
  elapsedMs: number,
): number {
  let soonest = Infinity;
  for (const f of failures) if (f.delayMs !== null) soonest = Math.min(soonest, f.delayMs);
  // A handler that did not run keeps its retry time (database clock, read at the claim).
  const claimedAt = record.claimedAt.getTime();
  const updated = new Set(failures.map((f) => f.handler));
  for (const name of pending) {
    const retryAt = ownFailure(record, name)?.retryAt;
    if (retryAt && !updated.has(name)) {
      soonest = Math.min(soonest, Math.max(0, Date.parse(retryAt) - claimedAt - elapsedMs));
    }
  }
  return soonest;
}

/**
 * The handler's failure entry. `Object.hasOwn`, never a bare index or `in`: handler names are
 * kebab-case, and `constructor` is a valid one that every plain object inherits.
 */
function ownFailure(
  record: OutboxRecord,
  handler: string,
): OutboxRecord['failures'][string] | undefined {
  return Object.hasOwn(record.failures, handler) ? record.failures[handler] : undefined;
}

function isEmpty(object: object): boolean {
  for (const key in object) if (Object.hasOwn(object, key)) return false;
  return true;
}
