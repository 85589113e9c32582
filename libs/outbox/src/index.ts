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
  type OutboxHandlerRegistration,
} from './event-dispatcher';
export { OutboxPublisher, type EmitOptions, type EmitResultOptions } from './outbox.publisher';
export {
  OutboxDispatcher,
  SHUTDOWN_MARGIN_MS,
  type OutboxDispatcherState,
} from './outbox.dispatcher';
export { OutboxRelay, type DrainReport, type DrainSignals } from './outbox.relay';
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
export { OUTBOX_MIGRATIONS } from './migrations';
export { OutboxRepository, type OutboxRepositoryOptions } from './outbox.repository';
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
} from './outbox-event.types';
export type { OutboxResult } from './outbox.result';

// Errors
export {
  DuplicateOutboxHandlerError,
  EmptyOutboxHandlerEventsError,
  InvalidOutboxEventError,
  InvalidOutboxHandlerNameError,
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
