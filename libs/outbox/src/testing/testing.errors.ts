import { OutboxError } from '../outbox.errors';
import { OutboxMessages } from '../outbox.messages';
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
    super(OutboxMessages.notIdle(bound, totals.claimed, totals.claims));
  }
}

/** A testing helper was given an option it cannot work with; names the option and its value. */
export class InvalidOutboxTestingOptionError extends OutboxError {
  constructor(helper: string, field: string, value: unknown, expected: string) {
    super(OutboxMessages.invalidTestingOption(helper, field, value, expected));
  }
}
