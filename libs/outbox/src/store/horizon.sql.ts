import { toWaitMs } from './store.client';

/**
 * The xmin horizon on the outbox's database. While a long transaction (a backup, a report, a
 * session left idle in transaction) keeps an old snapshot, no dead row can be removed: claims stay
 * fast, but the table and its indexes grow until it ends. Alert when `heldMs` stays above your
 * longest expected report or backup (30 minutes is a common start); it is not this pod's fault,
 * so readiness stays up.
 */
export interface OutboxHorizon {
  /**
   * How long the oldest transaction holding the horizon has been open, in ms; null when none is
   * visible. Another role's transactions are visible to a role with `pg_read_all_stats` only.
   */
  heldMs: number | null;
  /** Dead tuples of the outbox table, as PostgreSQL's statistics last counted them. */
  deadTuples: number;
}

/**
 * The xmin horizon on the outbox's database: how long the oldest transaction holding it has been
 * open (a backend with a snapshot, or a prepared transaction), and the outbox table's dead tuples
 * as the statistics last counted them. While an old snapshot is held nothing dead can be removed:
 * claims stay fast (they start at the head of the due range), but the table and its indexes grow.
 * Another role's transactions are visible only to a role with `pg_read_all_stats`.
 */
export const HORIZON_COLUMNS = `
    (SELECT (extract(epoch FROM now() - min(since)) * 1000)::float8
     FROM (SELECT xact_start AS since
           FROM pg_stat_activity
           WHERE datname = current_database()
             AND backend_xmin IS NOT NULL
             AND pid <> pg_backend_pid()
           UNION ALL
           SELECT prepared FROM pg_prepared_xacts WHERE database = current_database())
          AS holders) AS horizon_held_ms,
    pg_stat_get_dead_tuples('outbox_event'::regclass)::float8 AS dead_tuples`;

/** The horizon alone, for a page that does not read the bounded state. */
export const HORIZON = `SELECT ${HORIZON_COLUMNS}`;

export interface HorizonRow {
  horizon_held_ms: number | null;
  dead_tuples: number;
}

export function toHorizon(row: HorizonRow): OutboxHorizon {
  return { heldMs: toWaitMs(row.horizon_held_ms), deadTuples: row.dead_tuples };
}
