import type { EntityManager } from 'typeorm';
import { ISOLATION_LEVELS } from '../outbox.constants';

type IsolationLevel = (typeof ISOLATION_LEVELS)[number];
import { inlineValues } from './bounded-statement.util';
import type { DrivenTransaction } from './driven-transaction';
import { ok, type OutboxResult } from './outbox.result';
import { ClientStore } from './store.client';
import { deliveredAt } from './outbox-row.sql';

/**
 * One handler's delivery, recorded in its transaction under the attempt its claim holds;
 * `settles`: the handler is the last one the event waits for, and its record delivers the event.
 */
export interface HandlerDelivery {
  id: string;
  attempts: number;
  handler: string;
  settles: boolean;
}

/** A transaction of one backend: its pid, and its start in microseconds (text, exact). */
export interface BackendTransaction {
  pid: number;
  startedUs: string;
}

/**
 * Records one handler's delivery from inside that handler's own transaction (a transactional
 * handler), only if the claim that ran it still holds the row: same attempt, not settled, not
 * given back. The row lock it takes is held to COMMIT, so a claim racing it skips the row, and
 * a claim that won before it makes it match nothing: the caller then rolls the handler's writes
 * back. An entry already present wins, as in every settle. When the handler is the last one the
 * event waits for (`settles`), the same update marks the event delivered (`deliveredAt`), as
 * `MARK_DELIVERED` does: the event is done in the handler's commit, with one row version and no
 * settle after it.
 * $1 id, $2 attempts, $3 handler name.
 */
function recordDelivery(settles: boolean): string {
  return `
  UPDATE outbox_event
  -- The clock, not now(): now() is when the handler's transaction began, before its work.
  SET deliveries = jsonb_build_object($3::text, clock_timestamp()) || deliveries${
    settles
      ? `,
      ${deliveredAt('clock_timestamp()')}`
      : ''
  }
  WHERE id = $1::uuid
    AND attempts = $2::int
    AND dispatched_at IS NULL
    AND lease_expires_at IS NOT NULL
  RETURNING id
`;
}
const RECORD_DELIVERY = recordDelivery(false);
const RECORD_DELIVERY_SETTLING = recordDelivery(true);

/**
 * A delivery record and the `COMMIT` in one round trip, for a transaction the outbox began
 * itself. A guard that matched nothing divides by zero (SQLSTATE 22012, raised by this statement
 * alone): the script stops there, and the `COMMIT` after it never runs.
 */
function andCommit(record: string): string {
  return `
  WITH recorded AS (${record})
  SELECT 1 / count(*) AS recorded FROM recorded;
  COMMIT
`;
}
const RECORD_DELIVERY_AND_COMMIT = andCommit(RECORD_DELIVERY);
const RECORD_DELIVERY_SETTLING_AND_COMMIT = andCommit(RECORD_DELIVERY_SETTLING);
const DIVISION_BY_ZERO = '22012';

/**
 * Opens a transactional handler's transaction, in one round trip: its isolation level (the
 * transaction was begun without one, so this is its first statement), the backend's pid and the
 * transaction's start (in microseconds), to cancel its statement when the handler runs out of
 * budget, and a statement timeout for this transaction only, so no single statement of the
 * handler outlives its budget even if the cancel cannot be sent. Two statements in one simple
 * query (SET takes no parameters): the level is one of ISOLATION_LEVELS and the timeout an
 * integer, both checked here before they are written in.
 */
function handlerTransactionSetup(isolationLevel: IsolationLevel, budgetMs: number): string {
  const timeoutMs = Math.max(1, Math.ceil(budgetMs));
  if (!ISOLATION_LEVELS.includes(isolationLevel) || !Number.isSafeInteger(timeoutMs)) {
    throw new RangeError(`no handler transaction at ${isolationLevel}, ${timeoutMs} ms`);
  }
  return `SET TRANSACTION ISOLATION LEVEL ${isolationLevel};
  SELECT pg_backend_pid() AS pid,
         (extract(epoch FROM now()) * 1000000)::bigint::text AS started_us,
         set_config('statement_timeout', '${timeoutMs}', true) AS timeout`;
}

/** The setup's row: what `cancelBackend` needs to find the transaction. */
function toBackendTransaction([row]: { pid: number; started_us: string }[]): BackendTransaction {
  return { pid: row.pid, startedUs: row.started_us };
}

/**
 * Cancels the statement a backend is running, only while that backend is still in the given
 * transaction: a cancel that arrives late must not hit whatever the connection runs next.
 * $1 pid, $2 transaction start in microseconds (text).
 */
const CANCEL_BACKEND = `
  SELECT coalesce(bool_or(pg_cancel_backend(pid)), false) AS cancelled
  FROM pg_stat_activity
  WHERE pid = $1::int
    AND (extract(epoch FROM xact_start) * 1000000)::bigint = $2::bigint
`;

/**
 * The store of transactional handlers (`HandlerTransactions`): sets up a handler's own
 * transaction, records its delivery inside it, and cancels its statement when its budget runs
 * out.
 */
export class HandlerTransactionStore extends ClientStore {
  /**
   * Records one handler's delivery inside the handler's own transaction (`manager`), guarded by
   * the attempt its claim holds. False when the guard failed (the lease was lost and the event
   * claimed again, or it was settled): the caller must roll the transaction back.
   */
  async recordDelivery(
    manager: EntityManager,
    delivery: HandlerDelivery,
  ): Promise<OutboxResult<boolean>> {
    return this.client.runIn(
      'recordDelivery',
      manager,
      delivery.settles ? RECORD_DELIVERY_SETTLING : RECORD_DELIVERY,
      [delivery.id, delivery.attempts, delivery.handler],
      (rows: { id: string }[]) => rows.length === 1,
    );
  }

  /**
   * Records one handler's delivery and commits its transaction, in one round trip (see
   * `RECORD_DELIVERY_AND_COMMIT`). False when the guard failed: nothing was committed, and the
   * caller must roll the transaction back.
   */
  async recordDeliveryAndCommit(
    transaction: DrivenTransaction,
    delivery: HandlerDelivery,
  ): Promise<OutboxResult<boolean>> {
    const script = delivery.settles
      ? RECORD_DELIVERY_SETTLING_AND_COMMIT
      : RECORD_DELIVERY_AND_COMMIT;
    const committed = await this.client.commitWith(
      'recordDelivery',
      transaction,
      inlineValues(script, [delivery.id, delivery.attempts, delivery.handler]),
    );
    if (committed.ok) return ok(true);
    return committed.error.code === DIVISION_BY_ZERO ? ok(false) : committed;
  }

  /**
   * Begins a transactional handler's transaction and prepares it as `prepare` does, in one
   * round trip: what `cancelBackend` needs to find it.
   */
  async begin(
    transaction: DrivenTransaction,
    budgetMs: number,
    isolationLevel: IsolationLevel,
  ): Promise<OutboxResult<BackendTransaction>> {
    return this.client.beginWith(
      'prepareHandlerTransaction',
      transaction,
      `START TRANSACTION;\n${handlerTransactionSetup(isolationLevel, budgetMs)}`,
      toBackendTransaction,
    );
  }

  /**
   * Prepares a transactional handler's transaction, begun without an isolation level: sets
   * `isolationLevel`, bounds its statements by `budgetMs` and returns what `cancelBackend` needs
   * to find it.
   */
  async prepare(
    manager: EntityManager,
    budgetMs: number,
    isolationLevel: IsolationLevel,
  ): Promise<OutboxResult<BackendTransaction>> {
    return this.client.runScriptIn(
      'prepareHandlerTransaction',
      manager,
      handlerTransactionSetup(isolationLevel, budgetMs),
      toBackendTransaction,
    );
  }

  /**
   * Cancels the statement of a handler's transaction, from a connection of its own; does
   * nothing once that backend has left the transaction.
   */
  async cancelBackend(transaction: BackendTransaction): Promise<OutboxResult<boolean>> {
    return this.client.run(
      'cancelBackend',
      CANCEL_BACKEND,
      [transaction.pid, transaction.startedUs],
      ([row]: { cancelled: boolean }[]) => row.cancelled,
    );
  }
}
