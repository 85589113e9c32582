/** Injection token of the validated options (`ResolvedOutboxOptions`). */
export const OUTBOX_OPTIONS = Symbol('OUTBOX_OPTIONS');

/** Injection token of the TypeORM DataSource the outbox table lives in. */
export const OUTBOX_DATA_SOURCE = Symbol('OUTBOX_DATA_SOURCE');

/** Where the retention sweep keeps its interval: the app's SchedulerRegistry, or plain timers. */
export const OUTBOX_SCHEDULER = Symbol('OUTBOX_SCHEDULER');
