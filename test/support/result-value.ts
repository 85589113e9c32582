import type { OutboxResult } from '@app/outbox';

/** A store result's value; its typed error, thrown, when the statement failed. */
export function value<T>(result: OutboxResult<T>): T {
  if (!result.ok) throw result.error;
  return result.value;
}
