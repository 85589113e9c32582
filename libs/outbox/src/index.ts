export { OutboxEventEntity, OUTBOX_ENTITIES } from './outbox-event.entity';
export { OutboxRepository, type OutboxRepositoryOptions } from './outbox.repository';
export type {
  ClaimOptions,
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
export {
  InvalidOutboxEventError,
  OutboxError,
  OutboxPayloadNotSerializableError,
  OutboxStoreError,
  OutboxTransactionRequiredError,
} from './outbox.errors';
export { scrubError } from './scrub-error';
export { DEFAULT_OUTBOX_CHANNEL, OUTBOX_EVENT_DEAD, OUTBOX_TABLE } from './outbox.constants';
