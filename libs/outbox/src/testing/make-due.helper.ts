import type { OutboxEventFilter } from '../store/testing.store';
import { TestingStore } from '../store/testing.store';
import type { OutboxTestApp } from './drain-until-idle.helper';

/**
 * Travels past backoff: live events matching `filter` (all when empty) that wait for a retry
 * become due now, with each of their handlers still retrying. Dead events are replayed with
 * `OutboxAdmin.replay`. Returns the ids made due.
 */
export async function makeDue(
  app: OutboxTestApp,
  filter: OutboxEventFilter = {},
): Promise<string[]> {
  const result = await app.get(TestingStore, { strict: false }).makeDue(filter);
  if (!result.ok) throw result.error;
  return result.value;
}
