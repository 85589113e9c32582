import { serverLost } from '../store/connection-trust';
import type { OutboxCompleter } from './outbox.completer';
import type { PgListener } from './pg.listener';

/**
 * How long before the first failed claim a settle may have been acknowledged and still be lost:
 * what an asynchronous standby can lag behind its primary when the primary fails, with room.
 */
export const SETTLES_AT_RISK_MS = 10_000;

/**
 * What the engine does when its claims fail and when one comes back again: the database (or the
 * way to it) went away and returned, maybe as another server (a restart, a failover, a network
 * fault that healed). While claims fail, the LISTEN connection is replaced at once when the failure
 * shows the server lost, and probed otherwise, rather than at its next period: a connection a
 * moved virtual IP left half-open would hear no NOTIFY and say nothing. When a claim
 * answers again, the LISTEN connection reconnects at once (whatever its backoff grew to), and
 * the settles acknowledged shortly before the failure are written again: a new primary that
 * lacks them would otherwise run their handlers again once the claims' leases end.
 */
export class DatabaseReturn {
  /** `Date.now()` of the first failed claim since the last one that answered. */
  private failingSince: number | null = null;

  constructor(
    private readonly completer: OutboxCompleter,
    private readonly listener: () => PgListener | undefined,
    private readonly log: (line: string) => void,
  ) {}

  /**
   * A claim failed. One that shows the server gone or no longer the primary (see `serverLost`)
   * has the LISTEN connection replaced at once, as it reaches the same server; any other has it
   * probed.
   */
  claimFailed(error: { code?: unknown; message?: unknown }): void {
    this.failingSince ??= Date.now();
    if (serverLost(error)) this.listener()?.replaceNow();
    else this.listener()?.probeNow();
  }

  /** A settle statement failed: one that shows the server lost replaces LISTEN at once too. */
  statementFailed(error: { code?: unknown; message?: unknown }): void {
    if (serverLost(error)) this.listener()?.replaceNow();
  }

  async answeredAgain(): Promise<void> {
    this.listener()?.reconnectNow();
    const since = this.failingSince;
    this.failingSince = null;
    if (since === null) return;
    const lacked = await this.completer.writeAgain(since - SETTLES_AT_RISK_MS);
    if (lacked) {
      this.log(
        `Outbox wrote again ${lacked} settles that the database lacked after it answered ` +
          'again (a failover that lost acknowledged commits?); their handlers do not run again',
      );
    }
  }
}
