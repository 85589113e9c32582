import { performance } from 'node:perf_hooks';

/**
 * Keeps the wake of committed emits without a NOTIFY in every transaction.
 *
 * PostgreSQL serialises the commits of transactions that sent a NOTIFY (they queue on one
 * lock), so many producers committing at once wait for each other. With a window of `windowMs`
 * (the module option `tuning.wakeCoalesceMs`), the first emit of a window carries its NOTIFY as usual;
 * emits later in the window carry none, and once a transaction holding such an emit commits,
 * one trailing NOTIFY is sent after the window, on a connection of its own. Listeners still
 * wake within about `windowMs` of every commit, and a process sends at most two notifications
 * per window whatever its rate of emits.
 *
 * The commit is learned from TypeORM's transaction events (`afterTransactionCommit`); a trailing
 * wake is also planned at the emit itself, so a transaction committed some other way is still
 * covered if it commits within the window (and by the poll otherwise).
 */
export class WakeCoalescer {
  private lastInline = -Infinity;
  private trailing: NodeJS.Timeout | undefined;
  /**
   * Query runners whose open transaction holds an emit without its NOTIFY, with the payload that
   * NOTIFY would have carried (its rows' due time) once the emit told it.
   */
  private readonly unwoken = new WeakMap<object, number | null>();
  /** The earliest due time the next trailing wake is for; null when one of them is unknown. */
  private pendingDueFrom: number | null | undefined;

  constructor(
    private readonly windowMs: number,
    /** Sends a wake naming the earliest due time it is for, or null when that is not known. */
    private readonly sendWake: (dueFrom: number | null) => Promise<unknown>,
  ) {}

  /** Whether an emit in the transaction of `queryRunner` should carry its own NOTIFY. */
  inline(queryRunner: object): boolean {
    if (this.windowMs <= 0) return true;
    const now = performance.now();
    if (now - this.lastInline >= this.windowMs) {
      this.lastInline = now;
      return true;
    }
    this.unwoken.set(queryRunner, null);
    this.planTrailing();
    return false;
  }

  /** The emit without NOTIFY in the transaction of `queryRunner` wrote rows due from `epochMs`. */
  emitted(queryRunner: object, epochMs: number): void {
    if (!this.unwoken.has(queryRunner)) return;
    const known = this.unwoken.get(queryRunner);
    this.unwoken.set(queryRunner, known == null ? epochMs : Math.min(known, epochMs));
    this.include(epochMs);
  }

  /** The transaction of `queryRunner` committed (TypeORM's `afterTransactionCommit`). */
  committed(queryRunner: object): void {
    if (!this.unwoken.has(queryRunner)) return;
    // TypeORM reports a released savepoint as a commit too: wait for the outermost one.
    if ((queryRunner as { isTransactionActive?: boolean }).isTransactionActive) return;
    this.include(this.unwoken.get(queryRunner) ?? null);
    this.unwoken.delete(queryRunner);
    this.planTrailing();
  }

  /** Sends a wake still planned now, and plans no more (shutdown). */
  flush(): Promise<unknown> {
    if (!this.trailing) return Promise.resolve();
    clearTimeout(this.trailing);
    this.trailing = undefined;
    return this.sendWake(this.takeDueFrom()).catch(() => undefined);
  }

  private include(dueFrom: number | null): void {
    const pending = this.pendingDueFrom;
    if (pending === undefined) this.pendingDueFrom = dueFrom;
    else if (pending !== null)
      this.pendingDueFrom = dueFrom === null ? null : Math.min(pending, dueFrom);
  }

  /** What the wake sent now names: the earliest due time since the last one, if known. */
  private takeDueFrom(): number | null {
    const dueFrom = this.pendingDueFrom ?? null;
    this.pendingDueFrom = undefined;
    return dueFrom;
  }

  private planTrailing(): void {
    if (this.trailing) return;
    this.trailing = setTimeout(() => {
      this.trailing = undefined;
      // The trailing wake counts as this window's NOTIFY: the next emit rides on it.
      this.lastInline = performance.now();
      void this.sendWake(this.takeDueFrom()).catch(() => undefined);
    }, this.windowMs);
    this.trailing.unref();
  }
}
