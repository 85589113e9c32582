import { Logger } from '@nestjs/common';
import type { SettleOutcome } from '../store/lease/lease.types';
import type { OutboxResult } from '../store/outbox.result';
import type { OutboxLeaseStore } from '../store/lease/lease.store';
import { RateLimitedLog } from '../common/rate-limited-log.util';
import { scrubError } from '../common/scrub-error.util';
import {
  writeSettles,
  type CompleterOptions,
  type Settle,
  type SettleResult,
} from './settle-statements';
import { WrittenSettles } from './written-settles';

/** Error text in a log line; the whole scrubbed text is in the row's `last_error`. */
const LOGGED_ERROR_LENGTH = 500;
/** Statements of each kind in flight at once; more would only queue behind the commits. */
const MAX_FLUSHES = 2;
/**
 * How long the first settle of a batch waits for others (unless a batch fills first): in a storm
 * of small claims, two or three claims' settles share a commit. An ordered event's waits less:
 * its settle wakes the next event of its key, so each millisecond here is one per event of a key.
 */
const SETTLE_GATHER_MS = 10;
const SEQUENCED_GATHER_MS = 5;
/** Backoff of a settle statement that failed: doubling from the first to the last. */
const RETRY_FIRST_MS = 50;
const RETRY_LAST_MS = 1000;

/** Why settles are failing, while they are. */
export interface SettleFailure {
  since: Date;
  message: string;
  /** Settles given up so far in this failure (their handlers run again after the lease). */
  lost: number;
}

export interface CompleterHooks {
  /** A settle statement ended, written or not: a producer held back by settles may go on. */
  onSettled?(): void;
  /** Settles were given up: claiming should pause. */
  onGiveUp?(): void;
  /**
   * Failed events were scheduled again: the soonest falls due in `delayMs`, at `retryFrom`
   * (epoch ms, database clock) when the store said.
   */
  onRetryScheduled?(delayMs: number, retryFrom: number | null): void;
  /** A settle statement came back (`ok` false: a store failure) after `ms`. */
  onStatement?(kind: Settle['kind'], ms: number, ok: boolean): void;
  /** Events became dead in a settle: their types, one per event. */
  onDead?(types: readonly string[]): void;
  /** A settle statement failed in the store (see `DatabaseReturn.statementFailed`). */
  onStoreFailure?(error: { code?: string; message: string }): void;
}

interface Pending {
  item: Settle;
  /** `Date.now()` past which the lease may be gone: writing then could only be stale. */
  deadline: number;
  tries: number;
  notBefore: number;
  resolve(result: SettleResult): void;
}

type Kind = Settle['kind'];
const KINDS: readonly Kind[] = ['delivered', 'failed', 'release', 'held', 'limited'];

const perKind = <T>(make: () => T): Record<Kind, T> =>
  Object.fromEntries(KINDS.map((kind) => [kind, make()])) as Record<Kind, T>;

/**
 * The last step of the flow (claim → execute → complete). Each event's settle is queued as
 * soon as its handlers end; queued settles of a kind travel together in one statement, once the
 * first of them has waited SETTLE_GATHER_MS or a batch is full, at most two statements of a kind
 * at a time, so ends spread over a few milliseconds cost one round trip and one commit, not one
 * each (the commits of settles wait for the disk, and under load they compete with the
 * handlers' own). A statement that fails is retried with backoff for as long as the claim's
 * lease leaves time to write it (a failover blip costs nothing); a settle that runs out of lease
 * is given up, and the completer reports a failure until a settle succeeds again, so the
 * producer stops claiming work it could not record.
 */
export class OutboxCompleter {
  private readonly logger = new Logger('Outbox');
  private readonly failureLog = new RateLimitedLog((line) => this.logger.warn(line));
  private readonly deadLog = new RateLimitedLog((line) => this.logger.error(line));
  private readonly queues = perKind<Pending[]>(() => []);
  private readonly inFlight = perKind(() => 0);
  private readonly flushes = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private scheduled = false;
  private currentFailure: SettleFailure | null = null;
  private readonly written = new WrittenSettles();
  private writing = 0;
  private closed = false;

  constructor(
    private readonly repository: OutboxLeaseStore,
    private readonly options: CompleterOptions,
    private readonly hooks: CompleterHooks = {},
  ) {}

  /** Settles queued or being written. */
  get pending(): number {
    return KINDS.reduce((sum, kind) => sum + this.queues[kind].length, this.writing);
  }

  /** Set while settle statements fail; cleared by the next one that succeeds. */
  get failure(): SettleFailure | null {
    return this.currentFailure;
  }

  /**
   * A failure on record while nothing is left to settle is over as far as anyone can tell (the
   * store answered a claim since): called by the producer after a claim that worked.
   */
  clearFailureIfIdle(): void {
    if (this.pending === 0) this.currentFailure = null;
  }

  /** Takes settles again (after `close`). */
  open(): void {
    this.closed = false;
  }

  /**
   * Gives every queued settle up and takes no more (shutdown out of time): their rows keep the
   * lease, and statements already sent that fail are not retried.
   */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timerAt = Infinity;
    for (const kind of Object.keys(this.queues) as Kind[]) {
      for (const pending of this.queues[kind].splice(0)) pending.resolve('lost');
    }
  }

  /**
   * Queues a settle; resolves once it is written, found stale or given up. `awaited` (the next
   * event of a key's chain waits for it): it goes out at once, without gathering others.
   */
  complete(item: Settle, leaseDeadline: number, awaited = false): Promise<SettleResult> {
    if (this.closed) return Promise.resolve('lost');
    return new Promise((resolve) => {
      this.queues[item.kind].push({
        item,
        deadline: leaseDeadline,
        tries: 0,
        // Settles ending within a few milliseconds of each other go out together.
        notBefore:
          Date.now() +
          (awaited ? 0 : item.record.sequenced ? SEQUENCED_GATHER_MS : SETTLE_GATHER_MS),
        resolve,
      });
      this.schedule();
    });
  }

  /**
   * Writes again the delivered, failed and held-by-limit settles written since `from` (epoch ms), after the
   * database failed and answered again (see `WrittenSettles`). Resolves with how many the
   * database lacked (written now), or null when it failed again.
   */
  async writeAgain(from: number): Promise<number | null> {
    const { delivered, failed, limited } = this.written.takeSince(from);
    const { batchSize, deadRetryMs, deadRetryByType } = this.options;
    let lacked = 0;
    const writeAll = async <T>(
      settles: T[],
      write: (batch: T[]) => Promise<OutboxResult<SettleOutcome>>,
    ): Promise<boolean> => {
      for (let i = 0; i < settles.length; i += batchSize) {
        const result = await write(settles.slice(i, i + batchSize));
        if (!result.ok) return false;
        lacked += result.value.settled.length;
      }
      return true;
    };
    const done =
      (await writeAll(delivered, (batch) => this.repository.markDelivered(batch))) &&
      (await writeAll(failed, (batch) =>
        this.repository.markFailed(batch, { deadRetryMs, deadRetryByType }),
      )) &&
      (await writeAll(limited, (batch) => this.repository.markLimited(batch)));
    return done ? lacked : null;
  }

  /** Resolves once nothing is queued or being written, or when `signal` aborts. */
  async idle(signal?: AbortSignal): Promise<void> {
    while (this.pending > 0 && !signal?.aborted) {
      const waits = [...this.flushes];
      if (waits.length === 0) {
        // Only settles waiting for their time: wait for the next one (or the abort).
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            signal?.removeEventListener('abort', done);
            resolve();
          };
          // A flush planned for this turn has no timer: look again shortly.
          const wait = Number.isFinite(this.timerAt) ? this.timerAt - Date.now() : 1;
          const timer = setTimeout(done, Math.min(RETRY_LAST_MS, Math.max(1, wait)));
          signal?.addEventListener('abort', done, { once: true });
        });
      } else {
        await Promise.race(waits);
      }
    }
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // Ends of the same turn of the event loop go out together.
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    const now = Date.now();
    let nextRetry = Infinity;
    for (const kind of Object.keys(this.queues) as Kind[]) {
      const queue = this.queues[kind];
      while (this.inFlight[kind] < MAX_FLUSHES) {
        const ready: Pending[] = [];
        // Once a first try has gathered long enough, or a batch is full, every first try
        // queued goes with it: settles ride together rather than each claim's on its own.
        const gathered =
          queue.length >= this.options.batchSize ||
          queue.some((p) => p.tries === 0 && p.notBefore <= now);
        for (let i = 0; i < queue.length && ready.length < this.options.batchSize;) {
          const { notBefore, tries } = queue[i];
          if (notBefore <= now || (gathered && tries === 0)) ready.push(...queue.splice(i, 1));
          else i++;
        }
        if (ready.length === 0) break;
        this.write(kind, ready);
      }
      // Settles ready now but held back by statements in flight go out when one of those ends;
      // the others when their time comes.
      for (const pending of queue) {
        if (pending.notBefore > now) nextRetry = Math.min(nextRetry, pending.notBefore);
      }
    }
    if (nextRetry < this.timerAt) {
      clearTimeout(this.timer);
      this.timerAt = nextRetry;
      this.timer = setTimeout(
        () => {
          this.timerAt = Infinity;
          this.flush();
        },
        Math.max(0, nextRetry - now),
      );
    }
  }

  private write(kind: Kind, batch: Pending[]): void {
    this.inFlight[kind]++;
    this.writing += batch.length;
    const startedAt = performance.now();
    const flush: Promise<void> = writeSettles(
      this.repository,
      this.options,
      kind,
      batch.map((p) => p.item),
    )
      .then((result) => {
        this.hooks.onStatement?.(kind, performance.now() - startedAt, result.ok);
        return result;
      })
      .then(
        (result) => this.apply(kind, batch, result),
        // The repository reports store failures as results; anything else is a bug worth seeing.
        (err: unknown) => this.retryOrGiveUp(batch, scrubError(err), undefined),
      )
      .finally(() => {
        this.inFlight[kind]--;
        this.writing -= batch.length;
        this.flushes.delete(flush);
        this.flush();
        this.hooks.onSettled?.();
      });
    this.flushes.add(flush);
  }

  private apply(kind: Kind, batch: Pending[], result: OutboxResult<SettleOutcome>): void {
    if (!result.ok) {
      this.hooks.onStoreFailure?.(result.error);
      return this.retryOrGiveUp(batch, result.error.message, result.error.code);
    }
    this.currentFailure = null;
    const stale = new Set(result.value.stale);
    this.written.remember(
      batch.map((p) => p.item),
      stale,
    );
    const dead = new Set(result.value.newlyDead ?? []);
    if (kind === 'failed') {
      this.logFailures(batch, dead);
      if (dead.size > 0) {
        this.hooks.onDead?.(
          batch.filter((p) => dead.has(p.item.record.id)).map((p) => p.item.record.type),
        );
      }
    }
    if (kind === 'failed' || kind === 'limited') {
      let soonest = Infinity;
      for (const { item } of batch) {
        const { id } = item.record;
        if (item.kind !== kind || stale.has(id) || dead.has(id) || item.record.deadAt) continue;
        soonest = Math.min(soonest, item.settle.retryDelayMs);
      }
      if (soonest < Infinity)
        this.hooks.onRetryScheduled?.(soonest, result.value.retryFrom ?? null);
    }
    for (const pending of batch) {
      const id = pending.item.record.id;
      pending.resolve(
        stale.has(id)
          ? 'stale'
          : dead.has(id)
            ? 'dead'
            : kind === 'release'
              ? 'released'
              : 'settled',
      );
    }
  }

  /**
   * Puts a failed batch back with backoff, less what the lease no longer covers: a write after
   * the lease could only be stale, and the handlers run again on the next claim either way.
   * Not retried: what the server refused for its content (SQLSTATE classes 22, 23 and 42: it
   * would refuse it again), releases (a release lowers the attempt count, so a retry after a
   * first try that committed unseen could undo a newer claim; an unreleased row just waits for
   * its lease), and anything once the completer is closed.
   */
  private retryOrGiveUp(batch: Pending[], message: string, code: string | undefined): void {
    const now = Date.now();
    const permanent = code !== undefined && /^(22|23|42)/.test(code);
    let lost = 0;
    for (const pending of batch) {
      const wait = Math.min(RETRY_LAST_MS, RETRY_FIRST_MS * 2 ** pending.tries);
      if (
        this.closed ||
        permanent ||
        pending.item.kind === 'release' ||
        now + wait >= pending.deadline
      ) {
        lost++;
        pending.resolve('lost');
        continue;
      }
      pending.tries++;
      pending.notBefore = now + wait;
      this.queues[pending.item.kind].push(pending);
    }
    const failure = this.currentFailure ?? { since: new Date(), message, lost: 0 };
    this.currentFailure = { ...failure, message, lost: failure.lost + lost };
    if (lost > 0) {
      this.hooks.onGiveUp?.();
      this.logger.error(
        `Outbox settles keep failing: ${lost} given up, their handlers run again after the ` +
          `lease; claiming pauses for a while after each give-up. Last failure: ${message}`,
      );
    }
  }

  /** Failed handlers and newly dead events, scrubbed and rate-limited, so operators see them. */
  private logFailures(batch: readonly Pending[], newlyDead: ReadonlySet<string>): void {
    for (const { item } of batch) {
      if (item.kind !== 'failed') continue;
      const { record, settle } = item;
      const what = `${record.type} ${record.id}`;
      const error = scrubError(settle.error, LOGGED_ERROR_LENGTH);
      if (settle.error === null && !newlyDead.has(record.id)) {
        // No handler failed: the ones that ran succeeded, the others wait for their retry.
        continue;
      }
      if (newlyDead.has(record.id)) {
        this.deadLog.log(
          `Outbox event ${what} is dead after ${settle.attempts} attempts ` +
            `(failed: ${settle.failedHandlers.join(', ')}); ${error}`,
        );
      } else if (record.deadAt) {
        this.failureLog.log(`Outbox replay of dead event ${what} failed again: ${error}`);
      } else {
        this.failureLog.log(
          `Outbox event ${what} failed attempt ${settle.attempts} ` +
            `(${settle.failedHandlers.join(', ')}), next in ${Math.round(settle.retryDelayMs)} ms: ` +
            error,
        );
      }
    }
  }
}
