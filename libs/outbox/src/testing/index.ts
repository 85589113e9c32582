// nestjs-lease-outbox/testing: helpers for an app's own tests, on a real PostgreSQL.
export { outboxTestingOptions } from './testing.options';
export {
  drainUntilIdle,
  type DrainUntilIdleOptions,
  type OutboxTestApp,
} from './drain-until-idle.helper';
export {
  emitted,
  expectEmitted,
  expectNotEmitted,
  type EmittedSource,
  type ExpectedOutboxEvent,
} from './emitted.helper';
export type { DrainTotals } from './testing.types';
export { makeDue } from './make-due.helper';
export {
  InvalidOutboxTestingOptionError,
  OutboxExpectationError,
  OutboxNotIdleError,
} from './testing.errors';
export type { EmittedOutboxEvent, OutboxEventFilter } from '../store/testing.store';
