// Module and its parts
export { OutboxModule } from './outbox.module';
export {
  OutboxModuleOptions,
  OutboxListenOptions,
  type OutboxHandlerOverride,
  OutboxRetentionOptions,
  OutboxRetryOptions,
  resolveOutboxOptions,
  type ResolvedOutboxOptions,
} from './outbox.options';
export { OnOutboxEvent } from './handlers/outbox.decorators';
export {
  EventDispatcher,
  type DeliverOptions,
  type HandlerRun,
  type HandlerWithPolicy,
  type OutboxHandlerRegistration,
} from './handlers/event.dispatcher';
export { OutboxPublisher, type EmitOptions, type EmitResultOptions } from './emit/outbox.publisher';
export { OutboxAdmin } from './admin/outbox.admin';
export { OutboxDashboardModule } from './admin/dashboard/dashboard.module';
export type { OutboxDashboardOptions } from './admin/dashboard/dashboard.options';
export type {
  DeadLetter,
  DeadLetterFilter,
  DeadLetterGroup,
  DeadLetterList,
  DeadLetterPage,
  DeadLetterSelector,
  DeadLetterChange,
  ReplayOptions,
  DiscardOptions,
  FailedHandler,
  OutboxEventDetail,
  OutboxStatus,
  TypeBacklog,
  MinuteCount,
  DispatcherInfo,
  DispatcherReport,
} from './admin/dead-letter.types';
export {
  OutboxDispatcher,
  SHUTDOWN_MARGIN_MS,
  type DrainReport,
  type OutboxDispatcherState,
  type OutboxSlots,
} from './engine/outbox.dispatcher';
export type { SettleFailure, SettleResult } from './engine/outbox.completer';

export {
  OutboxHealthIndicator,
  type OutboxHealthOptions,
  type OutboxHealthResult,
} from './outbox.health';
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
  type TransactionalHandlerContext,
} from './handlers/outbox-handler.types';

// Storage
export { OutboxEventEntity, OUTBOX_ENTITIES } from './store/outbox-event.entity';
export { CreateOutboxEvent1764400000000 } from './migrations/1764400000000-create-outbox-event';
export { OutboxDueIndex1765000000000 } from './migrations/1765000000000-outbox-due-index';
export { OutboxEventCausation1766000000000 } from './migrations/1766000000000-outbox-event-causation';
export { OutboxHandlerFailures1767000000000 } from './migrations/1767000000000-outbox-handler-failures';
export { OUTBOX_MIGRATIONS } from './migrations';
export {
  OutboxRepository,
  type EnqueueOptions,
  type OutboxRepositoryOptions,
} from './store/outbox.repository';
export type {
  ClaimOptions,
  EmittedOutboxEvent,
  OutboxEventFilter,
  EnqueuedEvent,
  DeliveredSettle,
  FailedSettle,
  FailOutcome,
  MarkFailedOptions,
  NewOutboxEvent,
  OutboxEvent,
  OutboxEventDeadPayload,
  OutboxRecord,
  PendingState,
  PendingStateOptions,
  SettleOutcome,
  SweepOptions,
  TypeFilterOptions,
} from './outbox-event.types';
export type { OutboxResult } from './store/outbox.result';

// Errors
export {
  DuplicateOutboxHandlerError,
  EmptyOutboxHandlerEventsError,
  InvalidOutboxAdminQueryError,
  InvalidOutboxDashboardOptionsError,
  InvalidOutboxEventError,
  InvalidOutboxHandlerNameError,
  InvalidOutboxHandlerPolicyError,
  InvalidOutboxHandlerTimeoutError,
  InvalidOutboxHandlerTransactionError,
  InvalidOutboxOptionsError,
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
export { retryDelayMs, type BackoffSettings } from './handlers/retry-backoff.util';
export {
  handlerRetryDelayMs,
  type HandlerFailure,
  type HandlerPolicy,
  type HandlerRetry,
} from './handlers/handler.policy';
export {
  DEFAULT_OUTBOX_CHANNEL,
  ISOLATION_LEVELS,
  OUTBOX_EVENT_DEAD,
  OUTBOX_EVENT_DISCARDED,
  OUTBOX_EVENT_REPLAYED,
  OUTBOX_TABLE,
} from './outbox.constants';
