// nestjs-lease-outbox/testing: helpers for an app's own tests, on a real PostgreSQL.
export { outboxTestingOptions } from './testing-options';
export {
  drainUntilIdle,
  type DrainTotals,
  type DrainUntilIdleOptions,
  type OutboxTestApp,
} from './drain-until-idle';
export {
  emitted,
  expectEmitted,
  expectNotEmitted,
  type EmittedSource,
  type ExpectedOutboxEvent,
} from './emitted';
export { makeDue } from './make-due';
export {
  InvalidOutboxTestingOptionError,
  OutboxExpectationError,
  OutboxNotIdleError,
} from './testing.errors';
export type { EmittedOutboxEvent, OutboxEventFilter } from '../outbox-event.types';
