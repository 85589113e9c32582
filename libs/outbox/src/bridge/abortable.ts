import { onAbort } from '../common/abort-subscribers.util';

/**
 * `work`, or its signal's reason as soon as the signal aborts: a broker call that cannot be
 * cancelled still stops holding the handler. What it sends may still arrive; the event id it
 * carries lets the broker or the receiver drop the republish.
 */
export async function abortable<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  signal.throwIfAborted();
  let stop = (): void => undefined;
  const aborted = new Promise<never>((_, reject) => {
    stop = onAbort(signal, () => reject(abortError(signal)));
  });
  try {
    return await Promise.race([work, aborted]);
  } finally {
    stop();
  }
}

/** The aborted signal's reason as an Error, to reject with. */
export function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new Error(`aborted: ${String(reason)}`);
}
