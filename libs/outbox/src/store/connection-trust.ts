import { performance } from 'node:perf_hooks';

/**
 * SQLSTATEs and socket errors that say the server a connection reached is gone or is no longer
 * the primary: connection exceptions (08), an administrator or crash shutdown and a server
 * starting or stopping (57P01–57P03), a read-only transaction (25006: a standby, or a primary
 * demoted in a failover), and the socket's own failures.
 */
const SERVER_LOST_CODES =
  /^(08|57P0[123]$|25006$|E(CONNRESET|PIPE|CONNREFUSED|TIMEDOUT|HOSTUNREACH|NETUNREACH)$)/;

/** Messages of the driver's and the store's own for a connection that died or went silent. */
const SERVER_LOST_MESSAGES =
  /no answer from the database within|Connection terminated|connection lost|server was lost/i;

/**
 * How long a statement already sent on a connection opened before the server was lost may go on
 * waiting: the outbox's own statements answer in milliseconds, so one still out after this has
 * most likely gone into a connection a moved address left half-open.
 */
export const SUSPECT_STATEMENT_MS = 1000;

/** A statement given up because its connection opened before the server was lost. */
export class ServerLostError extends Error {
  constructor() {
    super(`the server was lost on another connection; this statement's was given up`);
    this.name = 'ServerLostError';
  }
}

/**
 * Whether a failure says the server behind the connection is gone or has changed role, rather
 * than that a statement failed (a lock or statement timeout, a constraint, an exhausted pool).
 */
export function serverLost(error: { code?: unknown; message?: unknown }): boolean {
  if (typeof error.code === 'string' && SERVER_LOST_CODES.test(error.code)) return true;
  return typeof error.message === 'string' && SERVER_LOST_MESSAGES.test(error.message);
}

/**
 * Which connections of a pool may still be used. When one connection shows the server gone or
 * no longer the primary (see `serverLost`), every connection opened before is suspect: after a
 * failover each of them reaches the old server, and one that a moved virtual IP left half-open
 * would hold its next statement for its whole deadline. Those are then closed as they come out
 * of the pool, and statements get connections opened since, to wherever the address now leads.
 */
export class ConnectionTrust {
  private readonly openedAt = new WeakMap<object, number>();
  private distrustBefore = -Infinity;
  /** Statements out now: when each was sent (`performance.now()`), and how to give it up. */
  private readonly out = new Map<object, { sentAt: number; giveUp: (error: Error) => void }>();

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** A connection of the pool just opened. */
  opened(connection: object): void {
    this.openedAt.set(connection, this.now());
  }

  /**
   * The server was lost: connections opened until now are not used again, and statements out on
   * them are given up once they have waited `SUSPECT_STATEMENT_MS` (at once if they have).
   */
  distrust(): void {
    const now = this.now();
    this.distrustBefore = now;
    for (const { sentAt, giveUp } of this.out.values()) {
      setTimeout(
        () => giveUp(new ServerLostError()),
        Math.max(0, sentAt + SUSPECT_STATEMENT_MS - now),
      );
    }
  }

  /** A statement sent on a connection of the pool; `giveUp` abandons it. Returns its end. */
  sent(giveUp: (error: Error) => void): () => void {
    const key = {};
    this.out.set(key, { sentAt: this.now(), giveUp });
    return () => this.out.delete(key);
  }

  /** Whether `connection` opened after the server was last lost (one never seen counts as old). */
  trusted(connection: object): boolean {
    return (this.openedAt.get(connection) ?? -Infinity) >= this.distrustBefore;
  }
}
