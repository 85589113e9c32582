import type { OutboxResult } from '../outbox.result';
import { ClientStore } from '../store.client';
import { ADMIT, admitParameters, RELEASE_PLACE, type AdmitRequest } from './handler-limit.sql';

export type { AdmitRequest };

/**
 * What the limit said to a run: go, or come back at `retryAt` (database clock); `partition`: the
 * partition its limit counted it in ('' for a limit across them all).
 */
export type Admission =
  | { admitted: true; at: Date; partition: string }
  | { admitted: false; at: Date; partition: string; retryAt: Date };

/**
 * The store of handlers' limits across processes (`outbox_handler_limit`): admits a run of a
 * limited handler before it starts and gives its place back when it returns (`OutboxAdmin`
 * reads the limits' state through its own store).
 */
export class HandlerLimitStore extends ClientStore {
  async admit(request: AdmitRequest): Promise<OutboxResult<Admission>> {
    return this.client.run(
      'admitRun',
      ADMIT,
      admitParameters(request),
      (rows: { admitted: boolean; at: Date; retry_at: Date | null; counted_in: string }[]) => {
        const { admitted, at, retry_at, counted_in: partition } = rows[0];
        return admitted || retry_at === null
          ? { admitted: true as const, at, partition }
          : { admitted: false as const, at, partition, retryAt: retry_at };
      },
    );
  }

  /** The run named `token` returned: its place in flight is free. */
  async release(handler: string, partition: string, token: string): Promise<OutboxResult<void>> {
    return this.client.run(
      'releasePlace',
      RELEASE_PLACE,
      [handler, partition, token],
      () => undefined,
      // A release lost in a crash only keeps the place until its hold runs out.
      { asyncCommit: true },
    );
  }
}
