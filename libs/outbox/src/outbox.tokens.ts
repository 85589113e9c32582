/** Injection token of the validated options (`ResolvedOutboxOptions`). */
export const OUTBOX_OPTIONS = Symbol('OUTBOX_OPTIONS');

/** Injection token of the TypeORM DataSource the outbox table lives in. */
export const OUTBOX_DATA_SOURCE = Symbol('OUTBOX_DATA_SOURCE');

/** The SchedulerRegistry the retention sweep registers with: the app's, or the module's own. */
export const OUTBOX_SCHEDULER = Symbol('OUTBOX_SCHEDULER');
