import type { ResolvedOutboxOptions } from '../outbox.options';

/**
 * What the producer does now, read from its state at each look for work (`OutboxProducer.mode`):
 *
 * | mode        | claims                           | from                                   | until                       |
 * | ----------- | -------------------------------- | -------------------------------------- | --------------------------- |
 * | `stopped`   | none; a claim out gives rows back | it is built, or `stop()` (shutdown)    | `start()`                   |
 * | `running`   | when work may be due and room is | `start()`, a pause's end, settles drain | another mode                |
 * | `paused`    | none; a wake is set for its end  | a claim failed, or settles given up    | see below                   |
 * | `held-back` | none                             | unwritten settles reach two claims     | a settle is written (pumps) |
 *
 * A pause ends 100 ms after a failed claim, doubling while claims keep failing, up to
 * `failedDrainRetryMs`; and `failedDrainRetryMs` after settles were given up.
 * Held back keeps claimed work from outrunning what can be recorded; paused keeps a failing
 * database from being asked again at once. Neither loses a wake: one that comes meanwhile is
 * answered by the first claim after.
 */
export type ProducerMode = 'stopped' | 'running' | 'paused' | 'held-back';

/** What the producer reads of the module's options. */
export type ProducerOptions = Pick<ResolvedOutboxOptions, 'concurrency' | 'leaseMs' | 'types'> &
  Pick<
    ResolvedOutboxOptions['tuning'],
    'batchSize' | 'pollIntervalMs' | 'idleFloorMs' | 'failedDrainRetryMs' | 'localQueue'
  > & {
    /** Read at each claim: the ordered handlers whose dead events do not hold their key. */
    skipDead?: () => readonly string[] | undefined;
    /** Share claims out across partitions (`fairness.enabled`). */
    fair?: boolean;
  };

/** What the producer tells its owner. */
export interface ProducerHooks {
  /** Each claim that came back, with how many events it leased. */
  claimed?(count: number): void;
  /** Each claim that failed, with why: the database may be away, or this process's way to it. */
  claimFailed?(error: { code?: unknown; message?: unknown }): void;
  /**
   * A claim came back after one failed: the database answers again (a restart, a failover, a
   * network fault that healed), so whatever waits out a backoff may try at once.
   */
  answeredAgain?(): void;
}

/** The producer's options from the module's: its tuning, with the slots, lease and types. */
export function producerOptions(
  options: ResolvedOutboxOptions,
  skipDead: ProducerOptions['skipDead'],
): ProducerOptions {
  const { tuning, concurrency, leaseMs, types, fairness } = options;
  return { ...tuning, concurrency, leaseMs, types, skipDead, fair: fairness.enabled };
}
