import { OutboxError } from '../outbox.errors';
import type { DrainTotals } from './testing.types';

/** An `expectEmitted` / `expectNotEmitted` that did not hold. */
export class OutboxExpectationError extends OutboxError {
  constructor(message: string) {
    super(message);
  }
}

/** `drainUntilIdle` still found events to deliver when its bound ran out. */
export class OutboxNotIdleError extends OutboxError {
  constructor(
    readonly totals: DrainTotals,
    bound: string,
  ) {
    super(
      `the outbox was not idle after ${bound}: ${totals.claimed} events claimed in ` +
        `${totals.claims} claims (does a handler emit an event for every event it handles?)`,
    );
  }
}

/** A testing helper was given an option it cannot work with; names the option and its value. */
export class InvalidOutboxTestingOptionError extends OutboxError {
  constructor(helper: string, field: string, value: unknown, expected: string) {
    super(`${helper}: ${field} must be ${expected}, got ${String(value)}`);
  }
}
