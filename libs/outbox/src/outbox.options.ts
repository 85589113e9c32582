import 'reflect-metadata';
import { Transform, Type } from 'class-transformer';
import {
  ArrayNotEmpty,
  IsArray,
  IsBoolean,
  IsInt,
  IsNumber,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  Max,
  Min,
  MinLength,
  ValidateNested,
} from 'class-validator';
import { DEFAULT_OUTBOX_CHANNEL } from './outbox.constants';

/**
 * When a handler that failed runs again: exponential backoff (the module's `retry` settings,
 * each optional), or a fixed schedule of delays, one per failure (the last repeats if attempts
 * remain).
 */
export type HandlerRetry = { baseMs?: number; maxMs?: number; jitter?: number } | readonly number[];

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
/** Node runs a timer with a longer delay after 1 ms, so no delay may exceed it. */
const MAX_TIMER_MS = 2_147_483_647;

const DECIMAL = /^\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?\s*$/i;

/**
 * Options often come from the environment (`forRootAsync` with ConfigService), where every value
 * is text: a numeric text becomes its number; anything else is left for the validator to name.
 */
const NumberFromText = () =>
  Transform(({ value }: { value: unknown }) =>
    typeof value === 'string' && DECIMAL.test(value) ? Number(value) : value,
  );

/** `'true'` and `'false'` (any case) become booleans; anything else is left for the validator. */
const BooleanFromText = () =>
  Transform(({ value }: { value: unknown }) => {
    if (typeof value !== 'string') return value;
    const text = value.trim().toLowerCase();
    return text === 'true' ? true : text === 'false' ? false : value;
  });

/** One decorator made of several, so a field's checks are written once and shared by its alias. */
const checks =
  (...decorators: PropertyDecorator[]): PropertyDecorator =>
  (target, key) => {
    for (const decorate of decorators) decorate(target, key);
  };

/**
 * The checks of each `tuning` field, shared by the deprecated top-level field of the same name.
 */
const TuningChecks = {
  batchSize: () => checks(NumberFromText(), IsInt(), Min(1), Max(10_000)),
  pollIntervalMs: () => checks(NumberFromText(), IsInt(), Max(MAX_TIMER_MS), Min(10)),
  idleFloorMs: () => checks(NumberFromText(), IsInt(), Max(MAX_TIMER_MS), Min(0)),
  failedDrainRetryMs: () => checks(NumberFromText(), IsInt(), Max(MAX_TIMER_MS), Min(1)),
  statementTimeoutMs: () => checks(NumberFromText(), IsInt(), Max(MAX_TIMER_MS), Min(100)),
  lockTimeoutMs: () => checks(NumberFromText(), IsInt(), Max(MAX_TIMER_MS), Min(10)),
  wakeCoalesceMs: () => checks(NumberFromText(), IsInt(), Min(0), Max(1000)),
  localQueue: () =>
    checks(
      ValidateNested(),
      Type(() => OutboxLocalQueueOptions),
    ),
};

/** Time kept free at the end of a lease for settling, so handlers never use all of it. */
export const LEASE_SETTLE_HEADROOM_MS = SECOND;

/** Exponential backoff between attempts of a failed event. */
export class OutboxRetryOptions {
  /** Delay before the second attempt; doubles with each further attempt. */
  @NumberFromText() @IsInt() @Max(MAX_TIMER_MS) @Min(1) baseMs?: number = SECOND;
  /** Upper bound of the delay. */
  @NumberFromText() @IsInt() @Max(MAX_TIMER_MS) @Min(1) maxMs?: number = 5 * MINUTE;
  /** Fraction of the delay drawn at random (0 = none, 1 = anywhere between 0 and the delay). */
  @NumberFromText() @IsNumber() @Min(0) @Max(1) jitter?: number = 0.2;
}

/** The dedicated LISTEN connection that wakes the engine on every committed enqueue. */
export class OutboxListenOptions {
  /** Off: the engine relies on the due timer and the poll alone. */
  @BooleanFromText() @IsBoolean() enabled?: boolean = true;
  @IsString() @Matches(/^[a-z_][a-z0-9_]{0,62}$/) channel?: string = DEFAULT_OUTBOX_CHANNEL;
  /**
   * Where to LISTEN when the TypeORM connection goes through a transaction pooler (PgBouncer
   * in transaction mode drops LISTEN): a direct connection string. Defaults to the
   * DataSource's own settings.
   */
  @IsOptional() @IsString() @MinLength(1) connectionString?: string;
  @NumberFromText() @IsInt() @Max(MAX_TIMER_MS) @Min(100) connectTimeoutMs?: number = 5 * SECOND;
  @NumberFromText() @IsInt() @Max(MAX_TIMER_MS) @Min(100) queryTimeoutMs?: number = 2 * SECOND;
  @NumberFromText() @IsInt() @Max(MAX_TIMER_MS) @Min(100) probeIntervalMs?: number = 2 * SECOND;
  @NumberFromText() @IsInt() @Max(MAX_TIMER_MS) @Min(1) reconnectMinMs?: number = 250;
  @NumberFromText() @IsInt() @Max(MAX_TIMER_MS) @Min(1) reconnectMaxMs?: number = 15 * SECOND;
}

/** Deletion of delivered rows after they have been kept for `retentionMs`. */
export class OutboxRetentionOptions {
  @BooleanFromText() @IsBoolean() enabled?: boolean = true;
  @NumberFromText() @IsInt() @Min(0) retentionMs?: number = 7 * DAY;
  @NumberFromText() @IsInt() @Max(MAX_TIMER_MS) @Min(1000) sweepIntervalMs?: number = 10 * MINUTE;
  @NumberFromText() @IsInt() @Min(1) @Max(100_000) batchSize?: number = 1000;
  /** Discarded events (`OutboxAdmin.discard`) are deleted this long after their discard. */
  @NumberFromText() @IsInt() @Min(0) discardedRetentionMs?: number = 30 * DAY;
}

/**
 * Claimed events waiting in this instance for a free slot (see `LocalQueue`): a claim can take
 * more rows than slots are free, and a slot that frees starts the next event at once.
 */
export class OutboxLocalQueueOptions {
  /** Most claimed events waiting for a slot; 0 claims only for the slots that are free. */
  @NumberFromText() @IsInt() @Min(0) @Max(10_000) size?: number = 500;
  /**
   * Longest wait of a claimed event for a slot, from its claim's answer; past it the event is given
   * back unstarted for any instance to take. Never longer than the lease leaves after the event's
   * handler budget.
   */
  @NumberFromText() @IsInt() @Max(MAX_TIMER_MS) @Min(100) ttlMs?: number = 5 * SECOND;
}

/**
 * Fair claims across partitions: an event's partition is its emitter's `partitionKey`, else its
 * organization id. While several partitions have events due, each claim shares its rows out
 * among them, and this instance's queue starts them in turn, so one partition's flood holds the
 * others up by about one claim rather than by the whole flood. Needs migrations
 * `OutboxFairClaims1775000000000` and `OutboxFairIndex1775500000000`; claims go in due order
 * until they have run.
 */
export class OutboxFairnessOptions {
  /** Off: every claim takes the first due events, whatever their partition. */
  @BooleanFromText() @IsBoolean() enabled?: boolean = true;
}

/**
 * Knobs for throughput, latency and the database's limits. Their defaults suit most apps; change
 * them when a benchmark or the health details say so.
 */
export class OutboxTuningOptions {
  /**
   * Most events per claim (further bounded by the free slots and the queue's room) and per settle
   * statement. A statement costs the server about as much to plan and commit for 250 rows as for
   * 60: bigger batches are most of what an event costs less under load.
   */
  @TuningChecks.batchSize() batchSize?: number = 250;
  /**
   * `statement_timeout` of every statement the outbox runs on its own (claim, settle, release,
   * state, sweep); the client also stops waiting, and discards the connection, 1 s after it.
   */
  @TuningChecks.statementTimeoutMs() statementTimeoutMs?: number = 5 * SECOND;
  /** `lock_timeout` of the same statements: a table lock held elsewhere fails them fast. */
  @TuningChecks.lockTimeoutMs() lockTimeoutMs?: number = 2 * SECOND;
  /** Fallback wake when no notification arrives. */
  @TuningChecks.pollIntervalMs() pollIntervalMs?: number = 30 * SECOND;
  /** Least wait before a planned wake (the next due time, a retry falling due). */
  @TuningChecks.idleFloorMs() idleFloorMs?: number = 50;
  /** Pause in claiming after a failed claim (database unreachable), or after settles were given up. */
  @TuningChecks.failedDrainRetryMs() failedDrainRetryMs?: number = SECOND;
  /**
   * Off (0) by default: every emit sends a NOTIFY with its commit. Above 0, a process that sent
   * one within this many milliseconds skips it and sends one trailing wake after the window, so
   * concurrent producers stop queueing on PostgreSQL's notify lock at commit; relays wake up to
   * this much later. See `WakeCoalescer`.
   */
  @TuningChecks.wakeCoalesceMs() wakeCoalesceMs?: number = 0;
  /** Claimed events waiting here for a free slot. */
  @TuningChecks.localQueue() localQueue?: OutboxLocalQueueOptions = new OutboxLocalQueueOptions();
}

/**
 * What `OutboxLivenessIndicator` counts as this process being unable to make progress; never
 * the database being away (see the indicator).
 */
export class OutboxLivenessOptions {
  /** Down when the event loop stalled longer than this within the last `eventLoopWindowMs`. */
  @NumberFromText() @IsInt() @Max(MAX_TIMER_MS) @Min(100) eventLoopStallMs?: number = 5 * SECOND;
  /**
   * How long a stall is remembered once it ended, so the probe after it still sees it: about one
   * probe period, so that each stall fails about one probe.
   */
  @NumberFromText() @IsInt() @Max(10 * MINUTE) @Min(SECOND) eventLoopWindowMs?: number =
    10 * SECOND;
  /**
   * Down when every slot has been held this long by a handler past its budget (one that ignores
   * its AbortSignal): nothing can run here until those handlers return.
   */
  @NumberFromText() @IsInt() @Max(MAX_TIMER_MS) @Min(SECOND) overdueSlotsMs?: number = MINUTE;
}

/**
 * Every setting of `OutboxModule`, with its default. Validated at boot: one error names every
 * bad field with its value.
 */
export class OutboxModuleOptions {
  /** How long a claim holds an event; must cover the handler budget plus settle headroom. */
  @NumberFromText() @IsInt() @Max(MAX_TIMER_MS) @Min(1000) leaseMs?: number = MINUTE;
  /** The time budget of one handler run; its AbortSignal fires when it is spent. */
  @NumberFromText() @IsInt() @Max(MAX_TIMER_MS) @Min(1) handlerTimeoutMs?: number = 10 * SECOND;
  /**
   * Slots: events delivered at the same time by one instance. A handler past its budget keeps
   * its slot until it really returns.
   */
  @NumberFromText() @IsInt() @Min(1) @Max(1000) concurrency?: number = 20;
  /** Attempts before an event becomes dead and is announced with `outbox.event.dead`. */
  @NumberFromText() @IsInt() @Min(1) maxAttempts?: number = 10;
  @ValidateNested() @Type(() => OutboxRetryOptions) retry?: OutboxRetryOptions =
    new OutboxRetryOptions();
  /**
   * How long a dead event rests between automatic replays; 0 turns them off, and dead events wait
   * for `OutboxAdmin.replay`. Otherwise at least 1000. Applies to an event from its next settle
   * (one already dead keeps the replay time it has).
   */
  @NumberFromText() @IsInt() @Min(0) deadRetryMs?: number = 6 * HOUR;
  /**
   * `deadRetryMs` for some event types, by type: `{ 'invoice.paid': 0 }` stops the automatic
   * replays of that type alone.
   */
  @IsOptional() @IsObject() deadRetryByType?: Record<string, number>;
  /** How long shutdown waits for running handlers before abandoning them to their lease. */
  @NumberFromText() @IsInt() @Max(MAX_TIMER_MS) @Min(0) shutdownGraceMs?: number = 10 * SECOND;
  @ValidateNested() @Type(() => OutboxListenOptions) listen?: OutboxListenOptions =
    new OutboxListenOptions();
  @ValidateNested() @Type(() => OutboxRetentionOptions) retention?: OutboxRetentionOptions =
    new OutboxRetentionOptions();
  @ValidateNested() @Type(() => OutboxLivenessOptions) liveness?: OutboxLivenessOptions =
    new OutboxLivenessOptions();
  /** Throughput, latency and database limits: see `OutboxTuningOptions`. */
  @ValidateNested() @Type(() => OutboxTuningOptions) tuning?: OutboxTuningOptions =
    new OutboxTuningOptions();
  /** Fair claims across partitions (tenants): see `OutboxFairnessOptions`. */
  @ValidateNested() @Type(() => OutboxFairnessOptions) fairness?: OutboxFairnessOptions =
    new OutboxFairnessOptions();
  /** Only these event types are claimed here (a dedicated worker pool); all when absent. */
  @IsOptional()
  @IsArray()
  @ArrayNotEmpty()
  @IsString({ each: true })
  @MinLength(1, { each: true })
  types?: string[];
  /** Start the engine at application bootstrap. Off for API-only pods and hand-drained tests. */
  @BooleanFromText() @IsBoolean() autoStart?: boolean = true;
  /**
   * Per-handler policy set from configuration, by handler name, over what `@OnOutboxEvent`
   * declares: `{ 'webhook-sender': { retry: [5000, 300000], maxAttempts: 3, timeoutMs: 15000 } }`.
   * Checked at boot like the decorator's values; a name no handler has fails the boot.
   */
  @IsOptional() @IsObject() handlers?: Record<string, OutboxHandlerOverride>;

  // The tuning knobs' former place, read as the same field of `tuning` (one of the two, not both).
  /** @deprecated Set `tuning.batchSize`. */
  @IsOptional() @TuningChecks.batchSize() batchSize?: number;
  /** @deprecated Set `tuning.statementTimeoutMs`. */
  @IsOptional() @TuningChecks.statementTimeoutMs() statementTimeoutMs?: number;
  /** @deprecated Set `tuning.lockTimeoutMs`. */
  @IsOptional() @TuningChecks.lockTimeoutMs() lockTimeoutMs?: number;
  /** @deprecated Set `tuning.pollIntervalMs`. */
  @IsOptional() @TuningChecks.pollIntervalMs() pollIntervalMs?: number;
  /** @deprecated Set `tuning.idleFloorMs`. */
  @IsOptional() @TuningChecks.idleFloorMs() idleFloorMs?: number;
  /** @deprecated Set `tuning.failedDrainRetryMs`. */
  @IsOptional() @TuningChecks.failedDrainRetryMs() failedDrainRetryMs?: number;
  /** @deprecated Set `tuning.wakeCoalesceMs`. */
  @IsOptional() @TuningChecks.wakeCoalesceMs() wakeCoalesceMs?: number;
  /** @deprecated Set `tuning.localQueue`. */
  @IsOptional() @TuningChecks.localQueue() localQueue?: OutboxLocalQueueOptions;
}

/** The fields of `tuning` that were once set at the top level, where they are still read. */
export const TUNING_ALIASES = [
  'batchSize',
  'statementTimeoutMs',
  'lockTimeoutMs',
  'pollIntervalMs',
  'idleFloorMs',
  'failedDrainRetryMs',
  'wakeCoalesceMs',
  'localQueue',
] as const satisfies ReadonlyArray<keyof OutboxTuningOptions & keyof OutboxModuleOptions>;
export type TuningAlias = (typeof TUNING_ALIASES)[number];

/** What `handlers` may set for one handler; each field wins over the decorator's. */
export interface OutboxHandlerOverride {
  timeoutMs?: number;
  /** A list replaces the decorator's retry and, unless `maxAttempts` is set here, its attempts. */
  retry?: HandlerRetry;
  maxAttempts?: number;
  /** `true`, `false` or `{ onDead: 'block' | 'skip' }`: see `OnOutboxEventOptions.ordered`. */
  ordered?: boolean | { onDead?: 'block' | 'skip' };
  /** See `OnOutboxEventOptions.maxConcurrent`. */
  maxConcurrent?: number;
  /** `{ limit, perMs }`: see `OnOutboxEventOptions.rate`. */
  rate?: { limit: number; perMs: number };
  /** See `OnOutboxEventOptions.limitPerPartition`. */
  limitPerPartition?: boolean;
}

type Resolved<T> = {
  readonly [K in keyof T]-?: T[K] extends object | undefined
    ? Resolved<NonNullable<T[K]>>
    : NonNullable<T[K]>;
};

/** Options after defaults, as the module's parts read them. */
export type ResolvedOutboxOptions = Omit<
  Resolved<OutboxModuleOptions>,
  'types' | 'listen' | 'handlers' | 'deadRetryByType' | TuningAlias
> & {
  readonly types: readonly string[] | undefined;
  readonly deadRetryByType: Readonly<Record<string, number>> | undefined;
  readonly handlers: Readonly<Record<string, OutboxHandlerOverride>> | undefined;
  readonly listen: Omit<Resolved<OutboxListenOptions>, 'connectionString'> & {
    readonly connectionString: string | undefined;
  };
};
