import { Logger } from '@nestjs/common';
import type { OutboxCompleter } from './outbox.completer';
import type { OutboxExecutor } from './outbox.executor';
import type { OutboxRepository } from '../store/outbox.repository';
import type { ResolvedOutboxOptions } from '../outbox.options';
import { scrubError } from '../common/scrub-error.util';

/**
 * Claims in flight at once. A slot that frees while a claim is out need not wait for that claim
 * and then its own: under load a second claim takes it at once, and slots freed meanwhile still
 * gather into the next one.
 */
const MAX_CLAIMS_IN_FLIGHT = 2;

type ProducerOptions = Pick<
  ResolvedOutboxOptions,
  | 'concurrency'
  | 'batchSize'
  | 'leaseMs'
  | 'types'
  | 'pollIntervalMs'
  | 'idleFloorMs'
  | 'failedDrainRetryMs'
>;

/**
 * The first step of the flow (claim → execute → complete). It owns `concurrency` slots and,
 * whenever slots are free and work may be due, claims up to the free count (at most
 * `batchSize`); every claimed event starts at once, so none waits behind another's slow
 * handler. At most two claims are in flight, each for slots no other claim asked for: slots
 * freed meanwhile are taken together by the next, so claims stay batched under load. Work
 * "may be due" after a wake (a NOTIFY, the listener's reconnect, the poll), when the earliest
 * due time planned from one index probe
 * arrives, when a failed event's retry falls due, and for as long as claims come back full.
 * Claiming pauses after a failed claim and while settles are being given up, and it stops
 * while settles back up, so claimed work never outruns what can be recorded.
 */
export class OutboxProducer {
  private readonly logger = new Logger('Outbox');
  private running = false;
  /** Claims sent and not answered yet, and the slots they asked for. */
  private readonly claims = new Set<Promise<void>>();
  private reserved = 0;
  private probing = false;
  private pumpScheduled = false;
  /** Bumped by every wake: a claim that started before a wake does not answer it. */
  private wakes = 0;
  private answeredWakes = -1;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private poll: NodeJS.Timeout | undefined;
  private pausedUntil = 0;
  private abandon: AbortSignal | undefined;
  private lastClaim: Date | null = null;
  private readonly maxUnsettled: number;

  constructor(
    private readonly repository: OutboxRepository,
    private readonly executor: OutboxExecutor,
    private readonly completer: OutboxCompleter,
    private readonly options: ProducerOptions,
    /** Each claim that came back, with how many events it leased. */
    private readonly onClaimed: (count: number) => void = () => undefined,
  ) {
    this.maxUnsettled = 2 * Math.max(options.batchSize, options.concurrency);
  }

  /** When the last claim came back without a store failure. */
  get lastClaimAt(): Date | null {
    return this.lastClaim;
  }

  /** Resolves once every claim sent so far has come back (and its rows were handed on). */
  async claimsSettled(): Promise<void> {
    while (this.claims.size > 0) await Promise.all(this.claims);
  }

  start(abandon: AbortSignal): void {
    this.running = true;
    this.abandon = abandon;
    this.pausedUntil = 0;
    clearInterval(this.poll);
    this.poll = setInterval(() => this.wake(), this.options.pollIntervalMs);
    this.wake();
  }

  /** Claims no more; a claim in flight gives its rows back when it returns. */
  stop(): void {
    this.running = false;
    clearInterval(this.poll);
    clearTimeout(this.timer);
    this.timerAt = Infinity;
  }

  /** Work may be due now. */
  wake(): void {
    this.wakes++;
    this.pump();
  }

  /** Work falls due in `delayMs` (a failed event's retry): wake then. */
  wakeIn(delayMs: number): void {
    if (!this.running) return;
    const at = Date.now() + Math.max(this.options.idleFloorMs, delayMs);
    if (at >= this.timerAt) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(
      () => {
        this.timerAt = Infinity;
        this.wake();
      },
      Math.max(0, at - Date.now()),
    );
  }

  /** Settles could not be written: claim nothing for a while (the failure is on health). */
  pause(): void {
    this.pausedUntil = Date.now() + this.options.failedDrainRetryMs;
    this.wakeIn(this.options.failedDrainRetryMs);
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

  private claimIfUseful(): void {
    if (!this.running || this.claims.size >= MAX_CLAIMS_IN_FLIGHT) return;
    if (this.answeredWakes === this.wakes) return;
    if (Date.now() < this.pausedUntil) return this.wakeIn(this.pausedUntil - Date.now());
    const free = this.options.concurrency - this.executor.active - this.reserved;
    // A slot's end or a settle's calls pump again.
    if (free <= 0 || this.completer.pending >= this.maxUnsettled) return;
    const limit = Math.min(free, this.options.batchSize);
    const wakesBefore = this.wakes;
    const claimedAt = Date.now();
    this.reserved += limit;
    const claim: Promise<void> = this.repository
      .claim({ limit, leaseMs: this.options.leaseMs, types: this.options.types })
      .then(
        (result) => {
          this.reserved -= limit;
          if (!result.ok) {
            const { message, code } = result.error;
            this.logger.warn(code ? `${message} (SQLSTATE ${code})` : message);
            this.pausedUntil = Date.now() + this.options.failedDrainRetryMs;
            return this.wakeIn(this.options.failedDrainRetryMs);
          }
          this.lastClaim = new Date();
          this.completer.clearFailureIfIdle();
          const records = result.value;
          this.onClaimed(records.length);
          for (const record of records) {
            if (this.running) {
              void this.executor.start(record, claimedAt, this.abandon);
            } else {
              // Claimed while stopping: give it back for another instance to take at once.
              void this.completer.complete(
                { kind: 'release', record, settle: { id: record.id, attempts: record.attempts } },
                claimedAt + this.options.leaseMs,
              );
            }
          }
          // A full claim may have left more behind; a short one answered every wake before it.
          if (records.length < limit) {
            this.answeredWakes = wakesBefore;
            this.planFromProbe();
          }
        },
        (err: unknown) => {
          this.reserved -= limit;
          this.logger.error(`Outbox claim crashed: ${scrubError(err)}`);
          this.pausedUntil = Date.now() + this.options.failedDrainRetryMs;
          this.wakeIn(this.options.failedDrainRetryMs);
        },
      )
      .finally(() => {
        this.claims.delete(claim);
        this.pump();
      });
    this.claims.add(claim);
  }

  /**
   * Plans the next wake from the earliest due time (one index probe), no sooner than the idle
   * floor; the poll covers the rest. Runs beside claims, never in front of one.
   */
  private planFromProbe(): void {
    if (this.probing || !this.running) return;
    this.probing = true;
    this.repository
      .nextDue({ types: this.options.types })
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
