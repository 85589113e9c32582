import type { EntityManager, QueryRunner } from 'typeorm';

/** What TypeORM's query runner exposes beyond its interface, and this class relies on. */
interface RunnerInternals {
  databaseConnection?: { query(text: string): Promise<unknown> };
  broadcaster?: { broadcast(event: string): Promise<void> };
  transactionDepth?: number;
  isTransactionActive: boolean;
}

type Runner = QueryRunner & RunnerInternals;

/**
 * A transaction on a TypeORM query runner whose `START TRANSACTION` travels with the statements
 * that set it up, and whose `COMMIT` with its last statement: two round trips fewer than
 * `startTransaction` and `commitTransaction`, each a round trip of its own. TypeORM's view of the
 * runner stays what those methods would leave: in a transaction while it is open (a nested
 * `manager.transaction` makes a savepoint), and its transaction subscribers hear the start, the
 * commit and a rollback. Its query logger does not see the `START TRANSACTION` and `COMMIT`.
 */
export class DrivenTransaction {
  private constructor(private readonly runner: Runner) {}

  /**
   * A driven transaction on `runner` once it is connected, or null when this TypeORM's runner
   * lacks what driving it needs (its transaction then goes through TypeORM's own methods).
   */
  static on(runner: QueryRunner): DrivenTransaction | null {
    const internals = runner as Runner;
    const drivable =
      typeof internals.databaseConnection?.query === 'function' &&
      typeof internals.broadcaster?.broadcast === 'function' &&
      internals.transactionDepth === 0 &&
      !internals.isTransactionActive;
    return drivable ? new DrivenTransaction(internals) : null;
  }

  get manager(): EntityManager {
    return this.runner.manager;
  }

  /** Whether the transaction began and has not ended (a failed statement leaves it open). */
  get open(): boolean {
    return this.runner.isTransactionActive && !this.runner.isReleased;
  }

  /**
   * Sends `script`, whose first statement starts the transaction; the rows of its last
   * statement.
   */
  async begin<R>(script: string): Promise<R[]> {
    const runner = this.runner;
    runner.isTransactionActive = true;
    try {
      await runner.broadcaster.broadcast('BeforeTransactionStart');
    } catch (error) {
      runner.isTransactionActive = false;
      throw error;
    }
    // Counted as begun before the answer: a script that fails half-way leaves a transaction
    // to roll back.
    runner.transactionDepth = 1;
    const rows = await this.send<R>(script);
    await runner.broadcaster.broadcast('AfterTransactionStart');
    return rows;
  }

  /**
   * Sends `script`, whose last statement is `COMMIT`. A statement that fails stops the script
   * before the `COMMIT`: the transaction is still open, aborted, for `rollback`.
   */
  async commit(script: string): Promise<void> {
    const runner = this.runner;
    await runner.broadcaster.broadcast('BeforeTransactionCommit');
    await runner.databaseConnection!.query(script);
    runner.isTransactionActive = false;
    runner.transactionDepth = 0;
    await runner.broadcaster.broadcast('AfterTransactionCommit');
  }

  /** Rolls the transaction back through TypeORM, when it is open on a connection still held. */
  async rollback(): Promise<void> {
    if (this.open) await this.runner.rollbackTransaction();
  }

  private async send<R>(script: string): Promise<R[]> {
    const results = await this.runner.databaseConnection!.query(script);
    const last: unknown = Array.isArray(results) ? results.at(-1) : results;
    return (last as { rows: R[] }).rows;
  }
}
