export interface BackoffSettings {
  baseMs: number;
  maxMs: number;
  jitter: number;
}

/**
 * Delay before the attempt after `attempt`: `baseMs * 2^(attempt-1)`, capped at `maxMs`, less a
 * random share of up to `jitter` so events that failed together do not return together.
 */
export function retryDelayMs(
  attempt: number,
  settings: BackoffSettings,
  random = Math.random,
): number {
  const exponent = Math.min(Math.max(attempt - 1, 0), 52);
  const delay = Math.min(settings.maxMs, settings.baseMs * 2 ** exponent);
  return Math.round(delay * (1 - settings.jitter * random()));
}
