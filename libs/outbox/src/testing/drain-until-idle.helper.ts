import { OutboxEngine, type DrainReport } from '../engine/outbox.engine';
import { TestingStore } from '../store/testing.store';
import { InvalidOutboxTestingOptionError, OutboxNotIdleError } from './testing.errors';
import type { DrainTotals } from './testing.types';
import { delay } from '../common/delay.util';

const BUSY_SLOTS_PAUSE_MS = 20;

/** What `drainUntilIdle` needs of an app: `INestApplicationContext` and `TestingModule` fit. */
export interface OutboxTestApp {
  get<T>(token: abstract new (...args: never[]) => T, options?: { strict?: boolean }): T;
}

export interface DrainUntilIdleOptions {
  /** Before each claim, make events waiting for a retry due now (`makeDue`). Default false. */
  makeRetryingDue?: boolean;
  /** Claims at most, so a handler that emits forever fails the test instead of hanging it. */
  maxClaims?: number;
  /** Gives up after this long. Default 30 000 ms. */
  timeoutMs?: number;
}

/**
 * Delivers everything due, claim after claim, until a claim finds nothing: events that handlers
 * emit along the way included. Throws `OutboxNotIdleError` when still busy after `maxClaims`
 * claims or `timeoutMs`, and the claim's error when a claim fails.
 */
export async function drainUntilIdle(
  app: OutboxTestApp,
  { makeRetryingDue = false, maxClaims = 100, timeoutMs = 30_000 }: DrainUntilIdleOptions = {},
): Promise<DrainTotals> {
  for (const [field, value] of Object.entries({ maxClaims, timeoutMs })) {
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new InvalidOutboxTestingOptionError(
        'drainUntilIdle',
        field,
        value,
        'an integer from 1',
      );
    }
  }
  const engine = app.get(OutboxEngine, { strict: false });
  const store = app.get(TestingStore, { strict: false });
  const deadline = Date.now() + timeoutMs;
  const totals: DrainTotals = {
    claims: 0,
    claimed: 0,
    delivered: 0,
    failed: 0,
    dead: 0,
    held: 0,
  };
  while (totals.claims < maxClaims && Date.now() < deadline) {
    if (makeRetryingDue) {
      const due = await store.makeDue({});
      if (!due.ok) throw due.error;
    }
    const report: DrainReport = await engine.drainOnce();
    if (report.error) throw report.error;
    totals.claims += 1;
    totals.claimed += report.claimed;
    totals.delivered += report.delivered;
    totals.failed += report.failed;
    totals.dead += report.dead;
    totals.held += report.held;
    if (report.claimed === 0 && report.limit > 0) return totals;
    // Every slot is held by a handler still running past its budget: give it a moment.
    if (report.limit === 0) await delay(BUSY_SLOTS_PAUSE_MS).promise;
  }
  throw new OutboxNotIdleError(
    totals,
    Date.now() >= deadline ? `${timeoutMs} ms` : `${maxClaims} claims`,
  );
}
