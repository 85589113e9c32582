import type { DataSource, EntityManager } from 'typeorm';
import { DEFAULT_OUTBOX_CHANNEL } from '../outbox.constants';
import { OutboxStoreError } from '../outbox.errors';
import { scrubError } from '../common/scrub-error.util';
import {
  CLIENT_DEADLINE_MARGIN_MS,
  hasPoolDriver,
  runBounded,
  type StatementBounds,
} from './bounded-statement.util';
import type { DrivenTransaction } from './driven-transaction';
import { fail, ok, type OutboxResult } from './outbox.result';

/** What every store is built with. */
export interface OutboxStoreOptions {
  /** NOTIFY channel signalled by every enqueue; listeners LISTEN on the same name. */
  channel?: string;
  /** `statement_timeout` of the store's own statements (not of those in a caller's transaction). Default 5000. */
  statementTimeoutMs?: number;
  /** `lock_timeout` of the store's own statements (not of those in a caller's transaction). Default 2000. */
  lockTimeoutMs?: number;
}

const DEFAULT_STATEMENT_TIMEOUT_MS = 5000;
const DEFAULT_LOCK_TIMEOUT_MS = 2000;

/**
 * How a store reaches PostgreSQL: its own statements, each in a short transaction of its own
 * bounded in time (see `runBounded`), or a statement in the caller's transaction. Database
 * failures come back as `{ ok: false, error }` with a scrubbed `OutboxStoreError`; the rows are
 * mapped by the statement's own mapping.
 */
export class StoreClient {
  readonly channel: string;
  private readonly bounds: StatementBounds;
  private inFlight = new AbortController();

  constructor(
    private readonly dataSource: DataSource,
    options: OutboxStoreOptions = {},
  ) {
    this.channel = options.channel ?? DEFAULT_OUTBOX_CHANNEL;
    this.bounds = {
      statementTimeoutMs: options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS,
      lockTimeoutMs: options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS,
    };
  }

  /**
   * The longest one of the store's own statements can take: the wait for a pool connection and
   * the statement, each bounded by the statement timeout and the client's margin.
   */
  get longestStatementMs(): number {
    return 2 * (this.bounds.statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS);
  }

  /** One of the store's own statements, bounded in time (see `runBounded`). */
  async run<R, T>(
    operation: string,
    sql: string,
    parameters: unknown[],
    map: (rows: R) => T,
    options: Pick<StatementBounds, 'asyncCommit' | 'byIndexOrder'> = {},
  ): Promise<OutboxResult<T>> {
    if (!hasPoolDriver(this.dataSource)) {
      return fail(
        new OutboxStoreError(operation, 'the DataSource is not a PostgreSQL one', undefined),
      );
    }
    let rows: unknown[];
    try {
      rows = await runBounded(this.dataSource, sql, parameters, {
        ...this.bounds,
        ...options,
        signal: this.inFlight.signal,
      });
    } catch (err) {
      return fail(toStoreError(operation, err));
    }
    return ok(map(rows as R));
  }

  /** A statement in the caller's transaction, under the caller's own settings. */
  async runIn<R, T>(
    operation: string,
    manager: EntityManager,
    sql: string,
    parameters: unknown[],
    map: (rows: R) => T,
  ): Promise<OutboxResult<T>> {
    let rows: R;
    try {
      // A structured result gives the rows whatever the statement's command.
      rows = (await manager.queryRunner!.query(sql, parameters, true)).records as R;
    } catch (err) {
      return fail(toStoreError(operation, err));
    }
    return ok(map(rows));
  }

  /**
   * Statements without parameters, sent together as one simple query in the caller's
   * transaction (one round trip); the rows are the last statement's. Straight to the
   * connection's driver: TypeORM's query runner keeps only a single statement's rows.
   */
  async runScriptIn<R, T>(
    operation: string,
    manager: EntityManager,
    script: string,
    map: (rows: R) => T,
  ): Promise<OutboxResult<T>> {
    const connection = (
      manager.queryRunner as { databaseConnection?: { query(text: string): Promise<unknown> } }
    ).databaseConnection;
    if (!connection) {
      return fail(new OutboxStoreError(operation, 'no connection in the transaction', undefined));
    }
    let rows: R;
    try {
      const results = await connection.query(script);
      const last: unknown = Array.isArray(results) ? results.at(-1) : results;
      rows = (last as { rows: R }).rows;
    } catch (err) {
      return fail(toStoreError(operation, err));
    }
    return ok(map(rows));
  }

  /** Begins `transaction` with `script` (see `DrivenTransaction.begin`). */
  async beginWith<R, T>(
    operation: string,
    transaction: DrivenTransaction,
    script: string,
    map: (rows: R[]) => T,
  ): Promise<OutboxResult<T>> {
    try {
      return ok(map(await transaction.begin<R>(script)));
    } catch (err) {
      return fail(toStoreError(operation, err));
    }
  }

  /** Ends `transaction` with `script`, whose last statement is `COMMIT`. */
  async commitWith(
    operation: string,
    transaction: DrivenTransaction,
    script: string,
  ): Promise<OutboxResult<void>> {
    try {
      await transaction.commit(script);
      return ok(undefined);
    } catch (err) {
      return fail(toStoreError(operation, err));
    }
  }

  /**
   * Gives up on every statement of the store's own still waiting for an answer, discarding
   * their connections, so a shutdown out of time leaves no pool connection checked out (the
   * DataSource could not close while one is). Their callers get a failed result.
   */
  abandonInFlight(): void {
    const current = this.inFlight;
    this.inFlight = new AbortController();
    current.abort();
  }
}

/**
 * What every store shares: one `StoreClient`, made from the DataSource and the store's options,
 * through which all its statements go.
 */
export abstract class ClientStore {
  protected readonly client: StoreClient;

  constructor(dataSource: DataSource, options: OutboxStoreOptions = {}) {
    this.client = new StoreClient(dataSource, options);
  }
}

function toStoreError(operation: string, err: unknown): OutboxStoreError {
  const driverError = (err as { driverError?: unknown }).driverError ?? err;
  const { code, constraint } = driverError as { code?: unknown; constraint?: unknown };
  // Only the driver's own message: TypeORM's wrapper and the driver error also hold the query
  // and its parameters, which must not travel any further.
  const message =
    driverError instanceof Error
      ? driverError.message
      : typeof driverError === 'string'
        ? driverError
        : 'unknown failure';
  return new OutboxStoreError(
    operation,
    scrubError(message),
    typeof code === 'string' ? code : undefined,
    typeof constraint === 'string' ? constraint : undefined,
  );
}

/** A type filter as the statements take it: text[], or null for every type. */
export function typeFilter(options: { types?: readonly string[] }): string[] | null {
  return options.types?.length ? [...options.types] : null;
}

/** A due time from the database as ms from now: never negative, null stays null. */
export function toDueInMs(ms: number | null): number | null {
  return ms === null ? null : Math.max(0, Math.ceil(ms));
}

/** A wait from the database in whole ms: never negative, null stays null. */
export function toWaitMs(ms: number | null): number | null {
  return ms === null ? null : Math.max(0, Math.floor(ms));
}
