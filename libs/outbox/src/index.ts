// Module and its parts
export { OutboxModule } from './outbox.module';
export {
  OutboxModuleOptions,
  OutboxFairnessOptions,
  OutboxListenOptions,
  OutboxLocalQueueOptions,
  OutboxLivenessOptions,
  type OutboxHandlerOverride,
  OutboxRetentionOptions,
  OutboxRetryOptions,
  OutboxTuningOptions,
  type ResolvedOutboxOptions,
} from './outbox.options';
export { resolveOutboxOptions } from './resolve-outbox-options';
export { OnOutboxEvent } from './handlers/outbox.decorators';
export { EventDispatcher, type OutboxHandlerRegistration } from './handlers/event.dispatcher';
export type { DeliverOptions } from './handlers/handler.runner';
export { OutboxPublisher, type EmitOptions, type EmitResultOptions } from './emit/outbox.publisher';
export { OutboxAdmin } from './admin/outbox.admin';
export type {
  DeadLetter,
  DeadLetterFilter,
  BlockedKey,
  BlockedKeyList,
  BlockedKeysFilter,
  DeadLetterGroup,
  DeadLetterList,
  DeadLetterPage,
  DeadLetterSelector,
  DeadLetterChange,
  ChangeBounds,
  ReplayOptions,
  DiscardOptions,
  FailedHandler,
} from './store/admin/dead-letter.types';
export type {
  OutboxEventDetail,
  OutboxEventList,
  OutboxEventState,
  OutboxEventsFilter,
  OutboxEventsPage,
} from './store/admin/event.types';
export type {
  OutboxStatus,
  TypeBacklog,
  MinuteCount,
  OutboxInstanceInfo,
  PartitionBacklog,
  PartitionBacklogTop,
  HandlerLimitState,
} from './store/admin/status.types';
export {
  OutboxEngine,
  SHUTDOWN_MARGIN_MS,
  type DrainReport,
  type EngineProgress,
  type OutboxEngineState,
  type OutboxSlots,
} from './engine/outbox.engine';
export type { SettleFailure } from './engine/outbox.completer';
export type { ProducerMode } from './engine/producer.types';

export {
  OutboxHealthIndicator,
  type OutboxHealthData,
  type OutboxHealthOptions,
  type OutboxHealthResult,
} from './outbox.health';
export {
  OutboxLivenessIndicator,
  CLAIM_WEDGED_MARGIN_MS,
  type OutboxLivenessData,
  type OutboxLivenessResult,
} from './outbox.liveness';
export { OutboxRetentionSweeper, OUTBOX_RETENTION_JOB } from './engine/outbox-retention.sweeper';
export type { PgListenerState } from './engine/pg-listener.types';
export { OUTBOX_OPTIONS } from './outbox.tokens';
export {
  type FollowUpEmit,
  type HandlerContext,
  type HandlerOutcome,
  type OnOutboxEventOptions,
  type OutboxHandlerFn,
  type OutboxIsolationLevel,
  type OutboxOrderedOnDead,
  type OutboxHandlerRate,
  type TransactionalHandlerContext,
} from './handlers/outbox-handler.types';

// Storage: the table, its migrations, and the lease repository the engine claims through
export { OutboxEventEntity, OUTBOX_ENTITIES } from './store/outbox-event.entity';
// The migrations: OUTBOX_MIGRATIONS, outboxMigrations() and each migration class by name
export * from './migrations';
export { OutboxLeaseStore, type OutboxLeaseStoreOptions } from './store/lease/lease.store';
export type {
  ClaimOptions,
  DeliveredSettle,
  FailedSettle,
  MarkFailedOptions,
  OutboxRecord,
  PendingState,
  StateCounts,
  OutboxHorizon,
  PendingStateOptions,
  SettleOutcome,
  TypeFilterOptions,
} from './store/lease/lease.types';
export type { EnqueuedEvent } from './store/emit/emit.store';
export type { NewOutboxEvent, OutboxEvent, OutboxEventDeadPayload } from './outbox-event.types';
export type { OutboxResult } from './store/outbox.result';

// Errors
export {
  DuplicateOutboxHandlerError,
  EmptyOutboxHandlerEventsError,
  InvalidOutboxAdminQueryError,
  OutboxAdminChangeInProgressError,
  InvalidOutboxDashboardOptionsError,
  InvalidOutboxEventError,
  InvalidOutboxHandlerNameError,
  InvalidOutboxHandlerPolicyError,
  InvalidOutboxHandlerLimitError,
  InvalidOutboxHandlerTimeoutError,
  InvalidOutboxHandlerTransactionError,
  InvalidOutboxOptionsError,
  InvalidOutboxMigrationsOptionsError,
  OutboxError,
  OutboxEventConflictError,
  OutboxHandlerTimeoutError,
  OutboxHandlerTransactionEndedError,
  OutboxLeaseLostError,
  OutboxPayloadNotSerializableError,
  OutboxStoreError,
  OutboxTransactionRequiredError,
  ScopedOutboxHandlerError,
  UnreachableOutboxHandlerError,
} from './outbox.errors';
export { scrubError } from './common/scrub-error.util';
export type { HandlerRetry } from './outbox.options';
export { type HandlerFailure } from './store/outbox-event.entity';
export {
  DEFAULT_OUTBOX_CHANNEL,
  ISOLATION_LEVELS,
  OUTBOX_EVENT_DEAD,
  OUTBOX_EVENT_DISCARDED,
  OUTBOX_EVENT_REPLAYED,
  OUTBOX_TABLE,
} from './outbox.constants';

// Renamed: the old names, deprecated (see the CHANGELOG)
export {
  OutboxDispatcher,
  type OutboxDispatcherState,
  type DispatcherInfo,
  OutboxRepository,
  type OutboxRepositoryOptions,
} from './deprecated';
