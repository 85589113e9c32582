import { InvalidOutboxHandlerLimitError } from '../outbox.errors';

/** The most a limit may count: more is no limit a database row should serialise. */
const MAX_COUNT = 10_000;
/** The longest window of a rate: a day. */
const MAX_WINDOW_MS = 86_400_000;

/**
 * A handler's limits across processes, resolved (see `OnOutboxEventOptions.maxConcurrent`,
 * `rate` and `limitPerPartition`); null for a handler without any.
 */
export interface HandlerLimit {
  readonly maxConcurrent: number | null;
  readonly rate: { readonly limit: number; readonly perMs: number } | null;
  /** Counted per partition of the event rather than across them all. */
  readonly perPartition: boolean;
}

/** Checks a handler's limits; a misuse fails the boot with the field and the value named. */
export function resolveHandlerLimit(handler: {
  name: string;
  location: string;
  maxConcurrent?: unknown;
  rate?: unknown;
  limitPerPartition?: unknown;
}): HandlerLimit | null {
  const { name, location, maxConcurrent, rate, limitPerPartition } = handler;
  const refuse = (field: string, value: unknown, expected: string): never => {
    throw new InvalidOutboxHandlerLimitError(name, location, field, value, expected);
  };
  const isCount = (value: unknown, most: number): value is number =>
    Number.isInteger(value) && (value as number) >= 1 && (value as number) <= most;
  if (maxConcurrent !== undefined && !isCount(maxConcurrent, MAX_COUNT)) {
    refuse('maxConcurrent', maxConcurrent, `an integer from 1 to ${MAX_COUNT}`);
  }
  if (rate !== undefined) {
    if (typeof rate !== 'object' || rate === null || Array.isArray(rate)) {
      refuse('rate', rate, '{ limit, perMs }');
    }
    const { limit, perMs, ...rest } = rate as Record<string, unknown>;
    const unknownKey = Object.keys(rest)[0];
    if (unknownKey !== undefined) refuse(`rate.${unknownKey}`, rest[unknownKey], 'absent');
    if (!isCount(limit, MAX_COUNT))
      refuse('rate.limit', limit, `an integer from 1 to ${MAX_COUNT}`);
    if (!isCount(perMs, MAX_WINDOW_MS)) {
      refuse('rate.perMs', perMs, `an integer from 1 to ${MAX_WINDOW_MS}`);
    }
  }
  if (limitPerPartition !== undefined && typeof limitPerPartition !== 'boolean') {
    refuse('limitPerPartition', limitPerPartition, 'true or false');
  }
  if (maxConcurrent === undefined && rate === undefined) {
    if (limitPerPartition === true) {
      refuse('limitPerPartition', limitPerPartition, 'set with maxConcurrent or rate');
    }
    return null;
  }
  const { limit, perMs } = (rate ?? {}) as { limit?: number; perMs?: number };
  return {
    maxConcurrent: (maxConcurrent as number | undefined) ?? null,
    rate: limit !== undefined && perMs !== undefined ? { limit, perMs } : null,
    perPartition: limitPerPartition === true,
  };
}
