/** The table every outbox statement reads and writes. */
export const OUTBOX_TABLE = 'outbox_event';

/** The NOTIFY channel an enqueue signals on commit, unless configured otherwise. */
export const DEFAULT_OUTBOX_CHANNEL = 'outbox_event';

/** The event announced, once, when an event runs out of attempts. */
export const OUTBOX_EVENT_DEAD = 'outbox.event.dead';

/** Recorded, once per event, when `OutboxAdmin.replay` makes a dead event due again. */
export const OUTBOX_EVENT_REPLAYED = 'outbox.event.replayed';

/** Recorded, once per event, when `OutboxAdmin.discard` sets an event aside. */
export const OUTBOX_EVENT_DISCARDED = 'outbox.event.discarded';

/** `aggregate_type` of the dead announcement: the aggregate is the outbox row itself. */
export const OUTBOX_EVENT_AGGREGATE = 'outbox_event';

/** Upper bound on the length of `last_error`, in characters. */
export const MAX_ERROR_LENGTH = 2000;

/** Metadata keys that carry trace context: left out when a re-emitted event is compared. */
export const TRACE_CONTEXT_KEYS = ['traceparent', 'tracestate', 'baggage'] as const;

/** Isolation levels a transactional handler may ask for. */
export const ISOLATION_LEVELS = ['READ COMMITTED', 'REPEATABLE READ', 'SERIALIZABLE'] as const;
