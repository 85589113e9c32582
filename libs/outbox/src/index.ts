// Module and its parts
export { OutboxModule } from './outbox.module';
export {
  OutboxModuleOptions,
  OutboxListenOptions,
  OutboxRetentionOptions,
  OutboxRetryOptions,
  resolveOutboxOptions,
  type ResolvedOutboxOptions,
} from './outbox.options';
export { OnOutboxEvent } from './outbox.decorators';
export {
  EventDispatcher,
  type DeliverOptions,
  type HandlerRun,
  type OutboxHandlerRegistration,
} from './event-dispatcher';
export { OutboxPublisher, type EmitOptions, type EmitResultOptions } from './outbox.publisher';
export {
  OutboxDispatcher,
  SHUTDOWN_MARGIN_MS,
  type DrainReport,
  type OutboxDispatcherState,
  type OutboxSlots,
} from './outbox.dispatcher';
export type { SettleFailure, SettleResult } from './outbox-completer';

export { OutboxHealthIndicator, type OutboxHealthOptions } from './outbox.health';
export { OutboxRetentionSweeper, OUTBOX_RETENTION_JOB } from './outbox-retention.sweeper';
export { PgListener, type PgListenerOptions, type PgListenerState } from './pg-listener';
export { OUTBOX_OPTIONS } from './outbox.tokens';
export type {
  HandlerContext,
  HandlerOutcome,
  OnOutboxEventOptions,
  OutboxEvent,
  OutboxHandlerFn,
} from './outbox-handler.types';

// Storage
export { OutboxEventEntity, OUTBOX_ENTITIES } from './outbox-event.entity';
export { CreateOutboxEvent1764400000000 } from './migrations/1764400000000-create-outbox-event';
export { OutboxDueIndex1765000000000 } from './migrations/1765000000000-outbox-due-index';
export { OUTBOX_MIGRATIONS } from './migrations';
export {
  OutboxRepository,
  type EnqueueOptions,
  type OutboxRepositoryOptions,
} from './outbox.repository';
export type {
  ClaimOptions,
  EnqueuedEvent,
  DeliveredSettle,
  FailedSettle,
  FailOutcome,
  MarkFailedOptions,
  NewOutboxEvent,
  OutboxEventDeadPayload,
  OutboxRecord,
  PendingState,
  PendingStateOptions,
  SettleOutcome,
  SweepOptions,
  TypeFilterOptions,
} from './outbox-event.types';
export type { OutboxResult } from './outbox.result';

// Errors
export {
  DuplicateOutboxHandlerError,
  EmptyOutboxHandlerEventsError,
  InvalidOutboxEventError,
  InvalidOutboxHandlerNameError,
  InvalidOutboxHandlerTimeoutError,
  InvalidOutboxOptionsError,
  OutboxError,
  OutboxEventConflictError,
  OutboxHandlerTimeoutError,
  OutboxPayloadNotSerializableError,
  OutboxStoreError,
  OutboxTransactionRequiredError,
  ScopedOutboxHandlerError,
  UnreachableOutboxHandlerError,
} from './outbox.errors';
export { scrubError } from './scrub-error';
export { retryDelayMs, type BackoffSettings } from './retry-backoff';
export { DEFAULT_OUTBOX_CHANNEL, OUTBOX_EVENT_DEAD, OUTBOX_TABLE } from './outbox.constants';
