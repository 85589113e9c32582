/** The parts of a pg client and of TypeORM's PostgreSQL driver this module relies on. */
interface PgClient {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
  connection?: { stream?: { destroy(): void } };
}
type Release = (error?: Error) => void;
interface PoolDriver {
  obtainMasterConnection(): Promise<[PgClient, Release]>;
}

export interface StatementBounds {
  /** Server-side `statement_timeout` of the statement. */
  statementTimeoutMs: number;
  /** Server-side `lock_timeout`: a table lock held elsewhere (a migration) fails fast. */
  lockTimeoutMs: number;
  /** Commit without waiting for the WAL flush (for claims, whose loss only frees rows). */
  asyncCommit?: boolean;
  /** Gives up at once, like a missed deadline (shutdown out of time). */
  signal?: AbortSignal;
}

/**
 * Time the client waits past the statement timeout before it stops trusting the connection: a
 * server that answers cancels the statement well within it, so only a dead or black-holed
 * connection gets here.
 */
export const CLIENT_DEADLINE_MARGIN_MS = 1000;

/** The statement got no answer in time; its connection was destroyed, not returned to the pool. */
export class StatementDeadlineError extends Error {
  constructor(readonly deadlineMs: number) {
    super(`no answer from the database within ${deadlineMs} ms; the connection was discarded`);
    this.name = 'StatementDeadlineError';
  }
}

/**
 * Whether `value` looks like a TypeORM DataSource on PostgreSQL. Checked by shape, not with
 * `instanceof`, so a second copy of typeorm in node_modules (npm link, some pnpm layouts) works.
 */
export function hasPoolDriver(value: unknown): value is { driver: PoolDriver } {
  const driver = (value as { driver?: { obtainMasterConnection?: unknown } } | null)?.driver;
  return typeof driver?.obtainMasterConnection === 'function';
}

/**
 * Runs one statement in a short transaction of its own, on a pool connection of the app's
 * DataSource, with a statement and a lock timeout set for that transaction only (`SET LOCAL`, so
 * nothing leaks to the app's queries on the same connection, and it works behind a transaction
 * pooler). The server enforces those; the client deadline covers what the server cannot: a dead
 * or half-open connection, or a pool with no free connection. A connection that missed its
 * deadline or failed mid-transaction is destroyed rather than returned to the pool.
 */
export function runBounded(
  dataSource: { driver: PoolDriver },
  text: string,
  values: unknown[],
  bounds: StatementBounds,
): Promise<unknown[]> {
  const deadlineMs = bounds.statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS;
  const acquired = dataSource.driver.obtainMasterConnection();
  return new Promise<unknown[]>((resolve, reject) => {
    let done = false;
    const finish = (outcome: () => void): boolean => {
      if (done) return false;
      done = true;
      clearTimeout(timer);
      bounds.signal?.removeEventListener('abort', onAbort);
      outcome();
      return true;
    };
    const giveUp = (error: Error) => {
      if (!finish(() => reject(error))) return;
      // Whatever the connection is doing now, it cannot be trusted with another statement.
      acquired.then(([client, release]) => discard(client, release, error), ignore);
    };
    const timer = setTimeout(() => giveUp(new StatementDeadlineError(deadlineMs)), deadlineMs);
    const onAbort = () => giveUp(new Error('abandoned: the outbox is shutting down'));
    if (bounds.signal?.aborted) onAbort();
    bounds.signal?.addEventListener('abort', onAbort, { once: true });
    acquired.then(
      async ([client, release]) => {
        if (done) return; // the deadline passed while waiting for a connection
        try {
          await client.query(prelude(bounds));
          const { rows } = await client.query(text, values);
          await client.query('COMMIT');
          if (finish(() => resolve(rows))) release();
        } catch (error) {
          // An aborted transaction or a broken socket: either way, not a connection to reuse.
          const failure = asError(error);
          if (finish(() => reject(failure))) discard(client, release, failure);
        }
      },
      (error: unknown) => finish(() => reject(asError(error))),
    );
  });
}

function prelude({ statementTimeoutMs, lockTimeoutMs, asyncCommit }: StatementBounds): string {
  // Integers validated at boot, so they are safe to inline; SET takes no bind parameters.
  const settings = [
    'BEGIN',
    `SET LOCAL statement_timeout = ${Math.trunc(statementTimeoutMs)}`,
    `SET LOCAL lock_timeout = ${Math.trunc(lockTimeoutMs)}`,
  ];
  if (asyncCommit) settings.push('SET LOCAL synchronous_commit = off');
  return settings.join('; ');
}

function discard(client: PgClient, release: Release, error: Error): void {
  client.connection?.stream?.destroy();
  release(error);
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

function ignore(): void {}
