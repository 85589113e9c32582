import { OutboxEngine, OutboxLeaseStore } from '@app/outbox';
import { randomUUID } from 'node:crypto';
import type { DataSource } from 'typeorm';

/**
 * Deliberate faults, off unless the runner is given `--break <mode>`, to show that the suite
 * reports what it claims to detect. Library code is never edited: a mode either makes the
 * worker's own handler misbehave or wraps a library method in this process only.
 */
export const BREAK_MODES = {
  /** The handler adds its effect a second time for one event in ten: duplicate effects. */
  'double-effect': 'a handler writes its effect twice for some events',
  /** `fault-b` reports success without its effect for one event in ten: lost events. */
  'skip-effect': 'a handler reports success without doing its effect for some events',
  /** Every handler runs again on a retry, as if `deliveries` were not consulted. */
  'ignore-deliveries': 'redelivery ignores the per-handler deliveries map',
  /** The claim no longer skips leased rows, as if its lease condition were removed from the SQL. */
  'no-lease-guard': 'the claim takes rows another worker still holds',
  /** A transactional handler's writes go through the DataSource, outside its transaction. */
  'tx-autocommit': "a transactional handler's writes autocommit instead of joining its transaction",
  /** The release statement matches no row: events given back at shutdown keep their lease. */
  'no-release': 'a stopping worker gives nothing back: its unstarted claims wait for their lease',
  /** The dispatcher says `running` while it stops, so readiness stays up during shutdown. */
  'ready-while-stopping': 'readiness stays 200 while the dispatcher stops',
  /** The inbox emits each message under a new event id: a redelivered message is a new event. */
  'inbox-fresh-ids': 'the inbox forgets the message id, so a message received twice acts twice',
} as const;

export type BreakMode = keyof typeof BREAK_MODES;

export function isBreakMode(mode: string): mode is BreakMode {
  return Object.hasOwn(BREAK_MODES, mode);
}

/** One event in ten, picked by the random tail of its UUIDv7 so every worker agrees. */
function sampled(eventId: string): boolean {
  return Number.parseInt(eventId.slice(-2), 16) % 10 === 0;
}

export const breaks = {
  doubleEffect: (mode: string | undefined, eventId: string) =>
    mode === 'double-effect' && sampled(eventId),
  skipEffect: (mode: string | undefined, handler: string, eventId: string) =>
    mode === 'skip-effect' && handler === 'fault-b' && sampled(eventId),
};

/**
 * The claim keeps a leased row out of the due range by moving its due time to the lease end;
 * without that assignment a row under lease stays claimable.
 */
const LEASE_GUARD =
  /,\s*(?:--[^\n]*\n\s*)*next_attempt_at = now\(\) \+ make_interval\(secs => \$2 \/ 1000\.0\)/;

/** The release's row condition; `AND false` after it makes it match nothing. */
const RELEASED_ROWS = /AND e\.dispatched_at IS NULL/;

/** Installs the library-side modes in this process, before the app is created. */
export function installBreak(mode: string | undefined): void {
  if (mode === 'ignore-deliveries') {
    // The plan's exports are read at each call (CommonJS), so this replaces it for the engine.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const plan = require('@app/outbox/engine/settle-plan') as {
      handlersToRun: (record: unknown, handlers: readonly unknown[]) => readonly unknown[];
    };
    plan.handlersToRun = (_record, handlers) => handlers;
  }
  if (mode === 'tx-autocommit') {
    // Loaded for this mode only: a module of this tree's layout, which a worker built on the
    // previous release (`mixed-versions`) does not have.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { HandlerTransactions } = require('@app/outbox/handlers/handler.transactions') as {
      HandlerTransactions: typeof import('@app/outbox/handlers/handler.transactions').HandlerTransactions;
    };
    const run = HandlerTransactions.prototype.run;
    HandlerTransactions.prototype.run = function (request) {
      const { dataSource } = this as unknown as { dataSource: DataSource };
      return run.call(this, {
        ...request,
        invoke: (transaction) => request.invoke({ ...transaction, manager: dataSource.manager }),
      });
    };
  }
  if (mode === 'no-release') {
    // Loaded for this mode only, like HandlerTransactions above.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { StoreClient } = require('@app/outbox/store/store.client') as {
      StoreClient: typeof import('@app/outbox/store/store.client').StoreClient;
    };
    const proto = StoreClient.prototype as unknown as {
      run: (operation: string, sql: string, ...rest: unknown[]) => unknown;
    };
    const run = proto.run;
    proto.run = function (this: unknown, operation, sql, ...rest) {
      const statement = operation === 'release' ? sql.replace(RELEASED_ROWS, '$& AND false') : sql;
      if (operation === 'release' && statement === sql) {
        throw new Error('no-release: the release statement no longer has the expected condition');
      }
      return run.call(this, operation, statement, ...rest);
    };
  }
  if (mode === 'ready-while-stopping') {
    const state = Object.getOwnPropertyDescriptor(OutboxEngine.prototype, 'state')!.get!;
    Object.defineProperty(OutboxEngine.prototype, 'state', {
      get(this: OutboxEngine) {
        const current = state.call(this) as OutboxEngine['state'];
        return current === 'stopping' ? 'running' : current;
      },
    });
  }
  if (mode === 'inbox-fresh-ids') {
    // Loaded for this mode only, like HandlerTransactions above.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { InboxReceiver } = require('@app/outbox/bridge/inbox.receiver') as {
      InboxReceiver: typeof import('@app/outbox/bridge/inbox.receiver').InboxReceiver;
    };
    const receive = InboxReceiver.prototype.receive;
    InboxReceiver.prototype.receive = function (batch) {
      const fresh = batch.map((delivery) => {
        const headers = { ...delivery.message.headers, 'outbox-event-id': randomUUID() };
        return { ...delivery, message: { ...delivery.message, id: null, headers } };
      });
      return receive.call(this, fresh);
    };
  }
  if (mode === 'no-lease-guard') {
    // `own` is the repository's private runner of its own statements; only this process's
    // copy of the claim loses its lease condition.
    const proto = OutboxLeaseStore.prototype as unknown as {
      own?: (operation: string, sql: string, ...rest: unknown[]) => unknown;
    };
    const own = proto.own;
    if (typeof own !== 'function') {
      throw new Error('no-lease-guard: OutboxLeaseStore has no `own` statement runner to wrap');
    }
    proto.own = function (operation, sql, ...rest) {
      const statement = operation === 'claim' ? sql.replace(LEASE_GUARD, '') : sql;
      if (operation === 'claim' && statement === sql) {
        throw new Error('no-lease-guard: the claim statement no longer has the expected guard');
      }
      return own.call(this, operation, statement, ...rest);
    };
  }
}
