import { performance } from 'node:perf_hooks';
import { Logger } from '@nestjs/common';
import type { OutboxCompleter } from './outbox.completer';
import type { ClaimLease, ExecutionResult, OutboxExecutor } from './outbox.executor';
import type { OutboxRecord } from '../store/lease/lease.types';
import { ok, type OutboxResult } from '../store/outbox.result';
import type { OutboxLeaseStore } from '../store/lease/lease.store';
import { scrubError } from '../common/scrub-error.util';
import { DueRange, headAfter } from './due-range';
import { LocalQueue, type QueuedEvent } from './local-queue';
import { DeadLook } from './dead-look';
import { ClaimsInFlight } from './claims-in-flight';
import type { ProducerHooks, ProducerMode, ProducerOptions } from './producer.types';
import { WakeTimer } from './wake-timer';
import { QueueDepth } from './queue-depth';

/**
 * The first step of the flow (claim → execute → complete). It owns `concurrency` slots and a
 * local queue of claimed events waiting for one (`localQueue.size`). A slot that frees takes the
 * next queued event at once; claims refill the queue in batches (at most `batchSize` rows), so
 * under load a claim's round trip is never between a free slot and its next event, and no event
 * waits behind another's slow handler for longer than the queue's TTL, after which it is given
 * back unstarted. Claims go one at a time, gathered under a stream of wakes (see `ClaimsInFlight`).
 * Work "may be due" after a wake (a NOTIFY, the listener's reconnect, the poll), when the
 * earliest due time planned from one index probe arrives, when a failed event's retry falls due,
 * and for as long as claims come back full. Claims start at the head of the due range rather
 * than at the start of its index (see `DueRange`), and look for due dead rows only when some may
 * be due (see `DeadLook`). Its modes (stopped, running, paused, held back: `ProducerMode`) say
 * when it claims.
 */
export class OutboxProducer {
  private readonly logger = new Logger('Outbox');
  private running = false;
  /** Claims sent and not answered yet, and the slots they asked for. */
  private readonly claims = new ClaimsInFlight();
  private reserved = 0;
  private probing = false;
  private pumpScheduled = false;
  /** Bumped by every wake: a claim that started before a wake does not answer it. */
  private wakes = 0;
  private answeredWakes = -1;
  private readonly planned = new WakeTimer();
  private poll: NodeJS.Timeout | undefined;
  private pausedUntil = 0;
  private abandon: AbortSignal | undefined;
  private lastClaim: Date | null = null;
  private readonly maxUnsettled: number;
  /** Queued events past their `startBy` are given back then, even if no slot frees. */
  private readonly queue = new LocalQueue(() => {
    this.startQueued();
    this.pump();
  });
  /** How many events the queue may hold now. */
  private readonly depth: QueueDepth;
  private readonly dueRange = new DueRange();
  private readonly deadLook = new DeadLook();

  constructor(
    private readonly repository: OutboxLeaseStore,
    private readonly executor: OutboxExecutor,
    private readonly completer: OutboxCompleter,
    private readonly options: ProducerOptions,
    private readonly hooks: ProducerHooks = {},
  ) {
    this.maxUnsettled = 2 * Math.max(options.batchSize, options.concurrency);
    this.depth = new QueueDepth(options.localQueue.size, options.concurrency);
  }

  /** What it does now: see `ProducerMode`. */
  get mode(): ProducerMode {
    if (!this.running) return 'stopped';
    if (Date.now() < this.pausedUntil) return 'paused';
    return this.settlesBackedUp ? 'held-back' : 'running';
  }

  /** Unwritten settles reach two claims' worth: claiming more would outrun them. */
  private get settlesBackedUp(): boolean {
    return this.completer.pending >= this.maxUnsettled;
  }

  /** When the last claim came back without a store failure. */
  get lastClaimAt(): Date | null {
    return this.lastClaim;
  }

  /** Resolves once every claim sent so far has come back (and its rows were handed on). */
  claimsSettled(): Promise<void> {
    return this.claims.settled();
  }

  start(abandon: AbortSignal): void {
    this.running = true;
    this.abandon = abandon;
    this.pausedUntil = 0;
    this.dueRange.reset();
    this.deadLook.maybeDue();
    clearInterval(this.poll);
    // The poll names no due time: it scans the whole range, so nothing stays behind the bound.
    this.poll = setInterval(() => this.wake(), this.options.pollIntervalMs);
    this.wake();
  }

  /**
   * Claims no more and gives the queued events back at once, for another instance to take; a
   * claim in flight gives its rows back when it returns.
   */
  stop(): void {
    this.running = false;
    clearInterval(this.poll);
    this.planned.clear();
    this.claims.stop();
    for (const event of this.queue.drain()) this.giveBack(event);
  }

  /** When the loop's oldest claim still out was sent (`performance.now()`), or null. */
  get oldestClaimSentAt(): number | null {
    return this.claims.oldestSentAt;
  }

  /** Where the next claim starts in the due range (epoch ms, database clock), or null. */
  get claimsFrom(): number | null {
    return this.running ? this.dueRange.lowerBound : null;
  }

  /**
   * Work may be due now. `dueFrom` (epoch ms, database clock) is the earliest due time of the
   * rows that woke it, when the wake names one; a wake that names none (the poll, a reconnect)
   * has the next claim scan the whole due range.
   */
  wake(dueFrom: number | null = null): void {
    if (dueFrom === null) {
      this.dueRange.reset();
      this.deadLook.maybeDue();
    } else {
      this.dueRange.lower(dueFrom);
    }
    this.wakes++;
    this.pump();
  }

  /** Rows of this instance's own settles fall due again from `at` (epoch ms, database clock). */
  retryFrom(at: number): void {
    this.dueRange.lower(at);
  }

  /**
   * A slot freed: it takes the next queued event at once, and the queue is refilled if low.
   * `heldMs`: how long the event that gave it back held it.
   */
  slotFreed(heldMs?: number): void {
    if (heldMs !== undefined) this.depth.held(heldMs);
    if (this.queue.length === 0) this.depth.ranDry();
    this.startQueued();
    this.pump();
  }

  /** Work falls due in `delayMs` (a failed event's retry): wake then. */
  wakeIn(delayMs: number): void {
    if (!this.running) return;
    this.planned.plan(Date.now() + Math.max(this.options.idleFloorMs, delayMs), () => {
      // A planned wake: what falls due then lies ahead of the bound, which stays. It may be a
      // dead row's replay (the probe looks at both kinds).
      this.deadLook.maybeDue();
      this.wakes++;
      this.pump();
    });
  }

  /** Settles could not be written, or a claim failed: paused for a while (health says why). */
  pause(ms = this.options.failedDrainRetryMs): void {
    this.pausedUntil = Date.now() + ms;
    this.wakeIn(ms);
  }

  /**
   * Looks for work if a slot is free and work may be due. Called on every wake, slot end and
   * settle; the look happens once the current turn of the event loop is over, so the slots that
   * free up together (the handlers of one claim ending) are claimed together.
   */
  pump(): void {
    if (this.pumpScheduled || !this.running) return;
    this.pumpScheduled = true;
    setImmediate(() => {
      this.pumpScheduled = false;
      this.claimIfUseful();
    });
  }

  /**
   * How many events a claim outside the loop may ask for now: the slots neither running an
   * event nor asked for by a claim in flight, at most `batchSize`; none while settles back up,
   * so claimed work never outruns what can be recorded.
   */
  freeSlots(): number {
    if (this.settlesBackedUp) return 0;
    const free = this.options.concurrency - this.executor.active - this.reserved;
    return Math.max(0, Math.min(free, this.options.batchSize));
  }

  /**
   * How many events the loop's next claim asks for: room in the slots, and in the local queue
   * while claims come back full (a backlog), at most `batchSize`. Without a backlog, events wait
   * in the table rather than in this instance's queue, behind its slow handlers, while another
   * instance has a free slot. While events are queued, the queue is refilled only once half of
   * it has room, so refills travel in batches; an empty queue takes any room at once.
   */
  private wanted(): number {
    const { concurrency, batchSize } = this.options;
    const queueLimit = this.depth.cap;
    const queueRoom = this.claims.backlog ? queueLimit : 0;
    const room = concurrency + queueRoom - this.executor.active - this.queue.length - this.reserved;
    const want = Math.max(0, Math.min(room, batchSize));
    if (this.queue.length > 0 && want < Math.min(batchSize, Math.ceil(queueLimit / 2))) {
      return 0;
    }
    return want;
  }

  /**
   * One claim outside the loop (`OutboxEngine.drainOnce`), through the same free slots and
   * backpressure: every event it claims starts at once. Resolves with what it asked for and the
   * claim's result: each event's execution, or the store error.
   */
  async claimOnce(
    abandon: AbortSignal,
  ): Promise<{ limit: number; result: OutboxResult<Promise<ExecutionResult>[]> }> {
    const limit = this.freeSlots();
    if (limit === 0) return { limit, result: ok([]) };
    const result = await this.claim(limit, true);
    if (!result.ok) return { limit, result };
    const { records, lease } = result.value;
    const started = records.map((r) =>
      this.executor.start(r, this.executor.handlersFor(r), lease, abandon),
    );
    return { limit, result: ok(started) };
  }

  private claimIfUseful(): void {
    const mode = this.mode;
    // Held back: the next settle written pumps again.
    if (mode === 'stopped' || mode === 'held-back') return;
    if (this.answeredWakes === this.wakes) return;
    if (mode === 'paused') return this.wakeIn(this.pausedUntil - Date.now());
    const limit = this.wanted();
    // A slot's end pumps again; a claim's answer too.
    if (limit === 0 || !this.claims.mayClaim(() => this.pump())) return;
    const wakesBefore = this.wakes;
    const claim: Promise<void> = this.claim(limit)
      .then(
        (result) => {
          if (!result.ok) {
            const { message, code } = result.error;
            this.logger.warn(code ? `${message} (SQLSTATE ${code})` : message);
            return this.pause(this.claims.retryPauseMs(this.options.failedDrainRetryMs));
          }
          const { records, lease } = result.value;
          const arrivedAt = Date.now();
          for (const record of records) {
            const handlers = this.executor.handlersFor(record);
            // The queue's wait counts from the claim's answer (a claim slower than the TTL still
            // starts what it brought in free slots); the lease bounds it as well.
            const latest = this.executor.latestStart(handlers, lease);
            const startBy = Math.min(arrivedAt + this.options.localQueue.ttlMs, latest);
            const lane = this.options.fair ? record.partition : '';
            const event = { record, handlers, lease, startBy, lane };
            // Claimed while stopping: give it back for another instance to take at once.
            if (this.running) this.queue.push(event);
            else this.giveBack(event);
          }
          this.startQueued();
          // A full claim may have left more behind; a short one answered every wake before it (a
          // wake since brings another claim, which probes if it is the last).
          if (records.length < limit) {
            this.answeredWakes = wakesBefore;
            if (this.wakes === wakesBefore) this.planFromProbe();
          }
        },
        (err: unknown) => {
          this.logger.error(`Outbox claim crashed: ${scrubError(err)}`);
          this.pause(this.claims.retryPauseMs(this.options.failedDrainRetryMs));
        },
      )
      .finally(() => {
        this.claims.delete(claim);
        this.pump();
      });
    // Sent in this same turn: `claim` ran up to its first await when it was called.
    this.claims.add(claim);
  }

  /** Starts queued events while slots are free; those past their `startBy` go back. */
  private startQueued(): void {
    if (!this.running) return;
    const now = Date.now();
    const expired: QueuedEvent[] = [];
    let started = 0;
    while (this.executor.active < this.options.concurrency) {
      const event = this.queue.take(
        now,
        (late) => expired.push(late),
        (queued) => this.executor.ready(queued.record),
      );
      if (!event) break;
      started++;
      void this.executor.start(event.record, event.handlers, event.lease, this.abandon);
    }
    if (this.queue.length === 0) this.depth.emptied();
    else this.depth.started(started, performance.now());
    expired.push(...this.queue.expire(now));
    if (expired.length > 0) {
      this.depth.expired();
      for (const event of expired) this.giveBack(event);
    }
  }

  /** Gives a claimed, unstarted event back to the table: due now, its attempt not counted. */
  private giveBack({ record, lease }: QueuedEvent): void {
    this.executor.givenBack(record);
    void this.completer.complete(
      { kind: 'release', record, settle: { id: record.id, attempts: record.attempts } },
      lease.deadline,
    );
  }

  /**
   * Claims `limit` events for slots of this producer (reserved until the claim answers). The
   * lease is read off the local clock once, here: `deadline` is `Date.now()` from before the
   * claim was sent plus the lease, so it never comes later than the lease's real end.
   */
  private async claim(
    limit: number,
    lookForDead = false,
  ): Promise<OutboxResult<{ records: OutboxRecord[]; lease: ClaimLease }>> {
    const sentAt = Date.now();
    const ticket = this.dueRange.send();
    const includeDead = this.deadLook.send(sentAt, lookForDead);
    this.reserved += limit;
    let result: OutboxResult<OutboxRecord[]>;
    try {
      result = await this.repository.claim({
        limit,
        leaseMs: this.options.leaseMs,
        types: this.options.types,
        dueFrom: ticket.from,
        includeDead,
        skipDead: this.options.skipDead?.(),
        fair: this.options.fair,
      });
    } catch (err) {
      this.claimFailing(ticket, err as Error);
      throw err;
    } finally {
      this.reserved -= limit;
    }
    if (!result.ok) {
      this.claimFailing(ticket, result.error);
      return result;
    }
    if (includeDead) this.deadLook.answered(result.value, limit);
    this.dueRange.answered(ticket, headAfter(result.value, limit));
    this.lastClaim = new Date();
    this.completer.clearFailureIfIdle();
    this.hooks.claimed?.(result.value.length);
    if (this.claims.answered(result.value.length, limit)) this.hooks.answeredAgain?.();
    this.executor.expectChains(result.value);
    return ok({
      records: result.value,
      lease: { sentAt, deadline: sentAt + this.options.leaseMs },
    });
  }

  private claimFailing(ticket: ReturnType<DueRange['send']>, error: Error): void {
    this.dueRange.failed(ticket);
    this.deadLook.maybeDue();
    this.claims.failed();
    this.hooks.claimFailed?.(error);
  }

  /**
   * Plans the next wake from the earliest due time (one index probe), no sooner than the idle
   * floor; the poll covers the rest. Runs beside claims, never in front of one.
   */
  private planFromProbe(): void {
    if (this.probing || !this.running) return;
    this.probing = true;
    this.repository
      .nextDue({ types: this.options.types, dueFrom: this.dueRange.lowerBound })
      .then(
        (result) => {
          if (result.ok && result.value !== null) this.wakeIn(result.value);
          else if (!result.ok) this.wakeIn(this.options.failedDrainRetryMs);
        },
        () => this.wakeIn(this.options.failedDrainRetryMs),
      )
      .finally(() => {
        this.probing = false;
      });
  }
}
