const subscribers = new WeakMap<AbortSignal, Set<() => void>>();

/**
 * Calls `listener` when `signal` aborts (at once if it has), until the returned function is
 * called. Every handler run listens to the engine's one abandon signal: a Set per signal
 * behind a single EventTarget listener costs less per run than adding and removing a listener
 * on the signal itself.
 */
export function onAbort(signal: AbortSignal | undefined, listener: () => void): () => void {
  if (!signal) return noop;
  if (signal.aborted) {
    listener();
    return noop;
  }
  let set = subscribers.get(signal);
  if (!set) {
    const listeners = new Set<() => void>();
    set = listeners;
    subscribers.set(signal, listeners);
    signal.addEventListener(
      'abort',
      () => {
        for (const notify of [...listeners]) notify();
        listeners.clear();
      },
      { once: true },
    );
  }
  set.add(listener);
  const listeners = set;
  return () => listeners.delete(listener);
}

function noop(): void {}
