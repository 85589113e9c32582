import type { OutboxHorizon } from '../horizon.sql';
import type { InstanceReport } from '../instance-report.store';
import type { StateCounts } from '../lease/lease.types';

/**
 * A running instance of the engine (its row in `outbox_dispatcher`), as `OutboxAdmin.instances`
 * lists it.
 */
export interface OutboxInstanceInfo extends InstanceReport {
  seenAt: Date;
  /** Reported within the last three report intervals; a process that died stops reporting. */
  reporting: boolean;
}

/** Events delivered in one minute, for a throughput sparkline. */
export interface MinuteCount {
  /** The minute's start. */
  at: Date;
  delivered: number;
}

/** Undelivered events of one type by state, for `OutboxAdmin.status`. */
export interface TypeBacklog extends StateCounts {
  type: string;
  /** Set aside by `OutboxAdmin.discard`; not counted in `dead`. */
  discarded: number;
  /** How long the type's oldest due event has waited; null when none is due. */
  oldestDueWaitMs: number | null;
  /** When the type's next event is due, in ms from now (0: now); null when nothing waits. */
  nextDueInMs: number | null;
}

/** The whole outbox at a glance: exact counts (a scan of undelivered rows), lag, and by type. */
export interface OutboxStatus extends StateCounts {
  /** Set aside by `OutboxAdmin.discard`; not counted in `dead`. */
  discarded: number;
  /** How long the oldest due live event has waited, in ms; null when none is due. */
  lagMs: number | null;
  /** When the next event is due, in ms from now (0: now); null when nothing waits. */
  nextDueInMs: number | null;
  byType: TypeBacklog[];
  /** The xmin horizon on the outbox's database (see `OutboxHorizon`). */
  horizon: OutboxHorizon;
}

/** One partition's first tries waiting for a claim (see `OutboxAdmin.partitions`). */
export interface PartitionBacklog {
  /** The events' `partitionKey`, else their organization id; '' for events with neither. */
  partition: string;
  /** Due first tries, counted up to 10,000 (`dueAtLeast`: at least that many). */
  due: number;
  dueAtLeast: boolean;
  /** How long its oldest due first try has waited. */
  oldestDueWaitMs: number;
}

/** Who floods: the partitions with the most due events, and with the oldest. */
export interface PartitionBacklogTop {
  /** Most due first tries first. */
  byDue: PartitionBacklog[];
  /** Longest-waiting oldest due first try first. */
  byOldest: PartitionBacklog[];
  /** Partitions with a due first try, among those visited. */
  partitions: number;
  /**
   * Every partition with a waiting first try was read; false past the first 1,000 (in key
   * order), the most one read visits.
   */
  complete: boolean;
}

/** One handler's limit across processes as it stands (see `OutboxAdmin.limits`). */
export interface HandlerLimitState {
  handler: string;
  /** The partition it counts in for a limit per partition; '' for one across them all. */
  partition: string;
  /** The limits as the app last declared them: null where it declares none. */
  maxConcurrent: number | null;
  rate: { limit: number; perMs: number } | null;
  /** Runs holding a place in flight now. */
  inFlight: number;
  /** Runs admitted in the last window of `rate`. */
  inWindow: number;
  /** Runs held back by the limit so far, on every instance: they did not start. */
  held: number;
  /** When the last run held back is due, while that is ahead. */
  heldUntil: Date | null;
}
