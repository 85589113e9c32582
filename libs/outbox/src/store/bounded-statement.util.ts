import { escapeLiteral } from 'pg';
import { ConnectionTrust, ServerLostError, serverLost } from './connection-trust';
/** The parts of a pg client and of TypeORM's PostgreSQL driver this module relies on. */
interface PgClient {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
  on?(event: 'error', listener: (error: Error) => void): unknown;
  removeListener?(event: 'error', listener: (error: Error) => void): unknown;
  connection?: { stream?: { destroy(): void } };
}
type Release = (error?: Error) => void;
interface PoolDriver {
  obtainMasterConnection(): Promise<[PgClient, Release]>;
  /** TypeORM's pg Pool, once the DataSource is initialised. */
  master?: { on?(event: 'connect', listener: (client: PgClient) => void): unknown };
}

/** Each guarded pool's trust in its connections (see `ConnectionTrust`). */
const guardedPools = new WeakMap<object, ConnectionTrust>();

/**
 * Gives every new connection of the DataSource's pool an 'error' listener for its whole life.
 * pg-pool listens to a connection's errors only while it is idle; a server that terminates the
 * backend of a checked-out connection between two of its users' listeners (a failover, a
 * `pg_terminate_backend`) would otherwise raise an uncaught 'error' and end the process. The
 * connection is unusable either way: its users' queries fail and the pool drops it on release.
 */
export function guardPoolConnections(dataSource: { driver: PoolDriver }): ConnectionTrust {
  const pool = dataSource.driver.master;
  if (!pool?.on) return new ConnectionTrust();
  let trust = guardedPools.get(pool);
  if (trust) return trust;
  const created = new ConnectionTrust();
  guardedPools.set(pool, (trust = created));
  pool.on('connect', (client) => {
    client.on?.('error', ignore);
    created.opened(client);
  });
  return trust;
}

/**
 * The server was lost on a connection of the outbox's own (its LISTEN connection): the pool's
 * connections opened before are not used again (see `ConnectionTrust`).
 */
export function distrustPoolConnections(dataSource: { driver: PoolDriver }): void {
  guardPoolConnections(dataSource).distrust();
}

export interface StatementBounds {
  /** Server-side `statement_timeout` of the statement. */
  statementTimeoutMs: number;
  /** Server-side `lock_timeout`: a table lock held elsewhere (a migration) fails fast. */
  lockTimeoutMs: number;
  /** Commit without waiting for the WAL flush (for claims, whose loss only frees rows). */
  asyncCommit?: boolean;
  /**
   * Plan with sequential scans and sorts priced out: for a statement that one index serves in
   * its own order, whatever statistics the table has when it is planned.
   */
  byIndexOrder?: boolean;
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

/** No pool connection became free in time (the app's pool is exhausted); nothing was sent. */
export class PoolWaitError extends Error {
  constructor(readonly deadlineMs: number) {
    super(`no free pool connection within ${deadlineMs} ms; nothing was sent`);
    this.name = 'PoolWaitError';
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
 * pooler). The whole transaction (`BEGIN; SET LOCAL …; statement; COMMIT`) travels as one
 * simple-protocol query with the values inlined as escaped literals: one round trip instead of
 * three, which is most of what an outbox statement costs on a fast network. The server enforces
 * the timeouts; the client deadline covers what the server cannot: a dead or half-open
 * connection. Waiting for a free pool connection has the same bound, counted apart.
 * A connection the server answered with an error is rolled back and returned to the pool; one
 * that missed its deadline or broke is destroyed instead.
 */
export async function runBounded(
  dataSource: { driver: PoolDriver },
  text: string,
  values: unknown[],
  bounds: StatementBounds,
): Promise<unknown[]> {
  const deadlineMs = bounds.statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS;
  const trust = guardPoolConnections(dataSource);
  const [client, release] = await acquireTrusted(dataSource, trust, deadlineMs, bounds.signal);
  return new Promise<unknown[]>((resolve, reject) => {
    let settled = false;
    let disposed = false;
    const dispose = (error?: Error) => {
      if (disposed) return;
      disposed = true;
      done();
      if (error && serverLost(error) && !(error instanceof ServerLostError)) trust.distrust();
      clearTimeout(timer);
      bounds.signal?.removeEventListener('abort', onAbort);
      client.removeListener?.('error', onSocketError);
      if (error) discard(client, release, error);
      else release();
    };
    const settle = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      outcome();
    };
    // Whatever the connection is doing now, it cannot be trusted with another statement.
    const giveUp = (error: Error) => {
      settle(() => reject(error));
      dispose(error);
    };
    // pg-pool stops listening for a checked-out client's errors: without a listener of ours, a
    // connection reset mid-statement would be an uncaught 'error' event.
    const onSocketError = (error: Error) => giveUp(error);
    const onAbort = () => giveUp(new Error('abandoned: the outbox is shutting down'));
    const timer = setTimeout(() => giveUp(new StatementDeadlineError(deadlineMs)), deadlineMs);
    const done = trust.sent(giveUp);
    client.on?.('error', onSocketError);
    if (bounds.signal?.aborted) onAbort();
    bounds.signal?.addEventListener('abort', onAbort, { once: true });

    void (async () => {
      try {
        const settings = prelude(bounds);
        const results = (await client.query(
          [...settings, inlineValues(text, values), 'COMMIT'].join(';\n'),
        )) as unknown as Array<{ rows: unknown[] }>;
        settle(() => resolve(results[settings.length].rows));
        dispose();
      } catch (error) {
        const failure = asError(error);
        settle(() => reject(failure));
        if (disposed) return;
        // The server answered (a lock or statement timeout, a constraint): the connection is
        // sound once the transaction is rolled back. Anything else broke the connection.
        if (typeof (error as { code?: unknown }).code !== 'string') return dispose(failure);
        if (serverLost(error as Error)) {
          // Connected, but to a server that is stopping or not the primary: so is every other.
          trust.distrust();
          return dispose(failure);
        }
        try {
          await client.query('ROLLBACK');
          dispose();
        } catch (rollbackError) {
          dispose(asError(rollbackError));
        }
      }
    })();
  });
}

/**
 * A pool connection opened since the server was last lost (see `ConnectionTrust`), within
 * `deadlineMs` in all: older ones are closed as they come out of the pool.
 */
async function acquireTrusted(
  dataSource: { driver: PoolDriver },
  trust: ConnectionTrust,
  deadlineMs: number,
  signal: AbortSignal | undefined,
): Promise<[PgClient, Release]> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const [client, release] = await acquire(dataSource, Math.max(1, deadline - Date.now()), signal);
    if (trust.trusted(client)) return [client, release];
    discard(client, release, new Error('opened before the database was lost'));
  }
}

/**
 * A pool connection within `deadlineMs`. One that arrives after the caller gave up has run
 * nothing, so it goes straight back to the pool.
 */
function acquire(
  dataSource: { driver: PoolDriver },
  deadlineMs: number,
  signal: AbortSignal | undefined,
): Promise<[PgClient, Release]> {
  const acquired = dataSource.driver.obtainMasterConnection();
  return new Promise((resolve, reject) => {
    let waiting = true;
    const stopWaiting = (error: Error) => {
      if (!waiting) return;
      waiting = false;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      reject(error);
      acquired.then(([, release]) => release(), ignore);
    };
    const onAbort = () => stopWaiting(new Error('abandoned: the outbox is shutting down'));
    const timer = setTimeout(() => stopWaiting(new PoolWaitError(deadlineMs)), deadlineMs);
    if (signal?.aborted) onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    acquired.then(
      (connection) => {
        if (!waiting) return;
        waiting = false;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        resolve(connection);
      },
      (error: unknown) => {
        if (!waiting) return;
        waiting = false;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        reject(asError(error));
      },
    );
  });
}

function prelude({
  statementTimeoutMs,
  lockTimeoutMs,
  asyncCommit,
  byIndexOrder,
}: StatementBounds): string[] {
  // Integers validated at boot, so they are safe to inline; SET takes no bind parameters.
  const settings = [
    'BEGIN',
    `SET LOCAL statement_timeout = ${Math.trunc(statementTimeoutMs)}`,
    `SET LOCAL lock_timeout = ${Math.trunc(lockTimeoutMs)}`,
  ];
  if (asyncCommit) settings.push('SET LOCAL synchronous_commit = off');
  if (byIndexOrder) settings.push('SET LOCAL enable_seqscan = off', 'SET LOCAL enable_sort = off');
  return settings;
}

/**
 * `text` with each `$n` replaced by the literal of `values[n - 1]`. The outbox's statements are
 * constants of this module's own, with no `$` inside their string literals, so every `$n` is a
 * parameter; the values are escaped as PostgreSQL literals (`escapeLiteral` doubles quotes and
 * backslashes), so no value can end its literal early.
 */
export function inlineValues(text: string, values: readonly unknown[]): string {
  return text.replace(/\$(\d+)/g, (_, index: string) => {
    const position = Number(index) - 1;
    if (position >= values.length) throw new Error(`no value for parameter $${index}`);
    return literal(values[position]);
  });
}

function literal(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error(`cannot inline the number ${value}`);
    return `(${value})`;
  }
  if (typeof value === 'boolean') return value ? 'TRUE' : 'FALSE';
  if (typeof value === 'string') return quote(value);
  if (value instanceof Date) return quote(value.toISOString());
  if (Array.isArray(value)) return quote(arrayText(value));
  return quote(JSON.stringify(value));
}

const NEEDS_ESCAPING = /['\\]/;

/**
 * `text` as a literal. Most of what the outbox inlines (ids, JSON of settles) holds no quote or
 * backslash, and `escapeLiteral` copies its input a character at a time: a settle's JSON of a
 * hundred events is kilobytes, on every settle.
 */
function quote(text: string): string {
  return NEEDS_ESCAPING.test(text) ? escapeLiteral(text) : `'${text}'`;
}

/** A PostgreSQL array in its text form: `{"a","b",NULL}`, each element quoted and escaped. */
function arrayText(items: readonly unknown[]): string {
  const elements = items.map((item) =>
    item === null || item === undefined
      ? 'NULL'
      : `"${(typeof item === 'string' ? item : JSON.stringify(item)).replace(/[\\"]/g, (c) => `\\${c}`)}"`,
  );
  return `{${elements.join(',')}}`;
}

function discard(client: PgClient, release: Release, error: Error): void {
  // A dying socket may still report an error; nobody else listens any more.
  client.on?.('error', ignore);
  client.connection?.stream?.destroy();
  release(error);
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

function ignore(): void {}
