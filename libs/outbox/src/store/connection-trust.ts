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
  /no answer from the database within|Connection terminated|connection lost/i;

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

  /** A connection of the pool just opened. */
  opened(connection: object): void {
    this.openedAt.set(connection, performance.now());
  }

  /** The server was lost: connections opened until now are not used again. */
  distrust(): void {
    this.distrustBefore = performance.now();
  }

  /** Whether `connection` opened after the server was last lost (one never seen counts as old). */
  trusted(connection: object): boolean {
    return (this.openedAt.get(connection) ?? -Infinity) >= this.distrustBefore;
  }
}
