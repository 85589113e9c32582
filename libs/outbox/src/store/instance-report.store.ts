import type { OutboxResult } from './outbox.result';
import { ClientStore } from './store.client';

/** What a running instance reports of itself every `INSTANCE_REPORT_MS`. */
export interface InstanceReport {
  /** `<host>/<pid>/<random>`: one per start of the engine. */
  id: string;
  host: string;
  pid: number;
  state: string;
  listener: string;
  types: readonly string[] | null;
  concurrency: number;
  inFlight: number;
  startedAt: Date;
  lastClaimAt: Date | null;
}

/**
 * An instance reports in: its row is written (or rewritten) with `seen_at` now, and rows of
 * instances not seen for a day (their process died without removing them) are cleared.
 * $1 id, $2 host, $3 pid, $4 state, $5 listener, $6 types (text[] or null), $7 concurrency,
 * $8 in flight, $9 started at, $10 last claim at.
 */
const REPORT_INSTANCE = `
  WITH forgotten AS (
    DELETE FROM outbox_dispatcher WHERE seen_at < now() - interval '1 day' AND id <> $1
  )
  INSERT INTO outbox_dispatcher
    (id, host, pid, state, listener, types, concurrency, in_flight, started_at, last_claim_at,
     seen_at)
  VALUES ($1, $2, $3, $4, $5, $6::text[], $7, $8, $9, $10, now())
  ON CONFLICT (id) DO UPDATE
  SET state = excluded.state,
      listener = excluded.listener,
      in_flight = excluded.in_flight,
      last_claim_at = excluded.last_claim_at,
      seen_at = now()
`;

/** A stopping instance leaves. $1 id. */
const FORGET_INSTANCE = `DELETE FROM outbox_dispatcher WHERE id = $1`;

/**
 * The heartbeat's store: each running instance's row in `outbox_dispatcher`, the table of
 * instances (read by `OutboxAdmin` through its own store).
 */
export class InstanceReportStore extends ClientStore {
  /** Writes an instance's report of itself (see `REPORT_INSTANCE`). */
  async report(report: InstanceReport): Promise<OutboxResult<void>> {
    return this.client.run(
      'reportInstance',
      REPORT_INSTANCE,
      [
        report.id,
        report.host,
        report.pid,
        report.state,
        report.listener,
        report.types ? [...report.types] : null,
        report.concurrency,
        report.inFlight,
        report.startedAt,
        report.lastClaimAt,
      ],
      () => undefined,
    );
  }

  /** Removes a stopping instance's report. */
  async forget(id: string): Promise<OutboxResult<void>> {
    return this.client.run('forgetInstance', FORGET_INSTANCE, [id], () => undefined);
  }

  /** Gives up on a report still waiting for an answer (see `StoreClient.abandonInFlight`). */
  abandonInFlight(): void {
    this.client.abandonInFlight();
  }
}
