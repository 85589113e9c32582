import { OutboxHandlerTimeoutError } from '../outbox.errors';
import { onAbort } from '../common/abort-subscribers.util';
import type { HandlerOutcome } from './outbox-handler.types';
import type { LazyAbort } from './lazy-abort';

/**
 * The handler's outcome: its own end, or the end of its budget, or the engine's abandon,
 * whichever comes first; the last two abort the handler's signal. Written with one promise and
 * callbacks rather than a `Promise.race` of three: it runs for every handler of every event.
 */
export function raceHandler(
  handlerName: string,
  budgetMs: number,
  running: Promise<unknown>,
  abort: LazyAbort,
  abandon: AbortSignal | undefined,
): Promise<HandlerOutcome> {
  return new Promise<HandlerOutcome>((resolve) => {
    let decided = false;
    // Replaced below; an abandon that has already happened decides before that.
    let unsubscribe = (): void => undefined;
    const decide = (outcome: HandlerOutcome) => {
      if (decided) return;
      decided = true;
      clearTimeout(timer);
      unsubscribe();
      resolve(outcome);
    };
    const stop = (error: unknown, timedOut: boolean) => {
      if (decided) return;
      abort.abort(error);
      decide({ handlerName, ok: false, error, timedOut });
    };
    const onAbandon = () => stop((abandon?.reason as unknown) ?? new Error('abandoned'), false);
    const timer = setTimeout(
      () => stop(new OutboxHandlerTimeoutError(handlerName, budgetMs), true),
      budgetMs,
    );
    running.then(
      () => decide({ handlerName, ok: true }),
      (error: unknown) => decide({ handlerName, ok: false, error, timedOut: false }),
    );
    unsubscribe = onAbort(abandon, onAbandon);
  });
}
