import { InvalidOutboxHandlerPolicyError } from '../outbox.errors';
import { retryDelayMs, type BackoffSettings } from './retry-backoff.util';
import type { OutboxOrderedOnDead } from './outbox-handler.types';
import type { TypeOrdering } from '../store/emit/emit.store';

/** Node runs a timer with a longer delay after 1 ms; no delay may exceed it. */
const MAX_DELAY_MS = 2_147_483_647;

/** A handler's retry schedule and attempts, resolved against the module's defaults. */
export interface HandlerPolicy {
  retry: BackoffSettings | readonly number[];
  /** Runs of this handler that may fail before the event is dead for it. */
  maxAttempts: number;
  /** Set for an ordered handler: what a dead event does to its key (see `resolveOrdering`). */
  ordered: { onDead: OutboxOrderedOnDead } | null;
}

const ON_DEAD: readonly OutboxOrderedOnDead[] = ['block', 'skip'];

/**
 * For the engine of an app with ordered handlers (undefined without any): those whose dead
 * events do not hold their key.
 */
export function orderedSettles(
  handlers: readonly { name: string; policy: HandlerPolicy }[],
): { skipDead: readonly string[] } | undefined {
  const ordered = handlers.filter((h) => h.policy.ordered);
  if (ordered.length === 0) return undefined;
  const skip = ordered.filter((h) => h.policy.ordered?.onDead === 'skip').map((h) => h.name);
  return { skipDead: [...new Set(skip)] };
}

/** The ordered handlers among a type's handlers, for the emit; undefined when there are none. */
export function typeOrdering(
  handlers: readonly { name: string; policy: HandlerPolicy }[],
): TypeOrdering | undefined {
  const ordered = handlers.filter((h) => h.policy.ordered).map((h) => h.name);
  if (ordered.length === 0) return undefined;
  return Object.freeze({
    orderedHandlers: Object.freeze(ordered),
    parkable: ordered.length === handlers.length,
  });
}

/** Checks a handler's `ordered`: `true`, `false` or `{ onDead: 'block' | 'skip' }`. */
export function resolveOrdering(handler: {
  name: string;
  location: string;
  ordered?: unknown;
}): HandlerPolicy['ordered'] {
  const { name, location, ordered } = handler;
  if (ordered === undefined || ordered === false) return null;
  if (ordered === true) return { onDead: 'block' };
  const onDead: unknown =
    typeof ordered === 'object' && ordered !== null && !Array.isArray(ordered)
      ? ((ordered as { onDead?: unknown }).onDead ?? 'block')
      : undefined;
  const unknownKeys =
    typeof ordered === 'object' && ordered !== null
      ? Object.keys(ordered).filter((key) => key !== 'onDead')
      : [];
  if (unknownKeys.length > 0 || !ON_DEAD.includes(onDead as OutboxOrderedOnDead)) {
    throw new InvalidOutboxHandlerPolicyError(
      name,
      location,
      unknownKeys.length > 0 ? `ordered.${unknownKeys[0]}` : 'ordered',
      ordered,
      "true, false or { onDead: 'block' | 'skip' }",
    );
  }
  return { onDead: onDead as OutboxOrderedOnDead };
}

/** Delay before the next run of a handler that has now failed `failures` times. */
export function handlerRetryDelayMs(
  policy: HandlerPolicy,
  failures: number,
  random = Math.random,
): number {
  const { retry } = policy;
  if (isSchedule(retry)) return retry[Math.min(failures, retry.length) - 1] ?? 0;
  return retryDelayMs(failures, retry, random);
}

function isSchedule(retry: HandlerPolicy['retry']): retry is readonly number[] {
  return Array.isArray(retry);
}

/**
 * Checks a handler's own `retry` and `maxAttempts` and fills the rest from the module's. A fixed
 * schedule without `maxAttempts` allows one attempt more than it has delays.
 */
export function resolveHandlerPolicy(
  handler: {
    name: string;
    location: string;
    retry?: unknown;
    maxAttempts?: unknown;
    ordered?: unknown;
  },
  defaults: Omit<HandlerPolicy, 'ordered'>,
): HandlerPolicy {
  return { ...resolveRetry(handler, defaults), ordered: resolveOrdering(handler) };
}

function resolveRetry(
  handler: { name: string; location: string; retry?: unknown; maxAttempts?: unknown },
  defaults: Omit<HandlerPolicy, 'ordered'>,
): Omit<HandlerPolicy, 'ordered'> {
  const { name, location, retry, maxAttempts } = handler;
  const refuse = (field: string, value: unknown, expected: string): never => {
    throw new InvalidOutboxHandlerPolicyError(name, location, field, value, expected);
  };
  const isDelay = (value: unknown): value is number =>
    Number.isInteger(value) && (value as number) >= 0 && (value as number) <= MAX_DELAY_MS;
  if (
    maxAttempts !== undefined &&
    (!Number.isInteger(maxAttempts) || (maxAttempts as number) < 1)
  ) {
    refuse('maxAttempts', maxAttempts, 'an integer from 1');
  }
  if (retry === undefined) {
    return { retry: defaults.retry, maxAttempts: (maxAttempts as number) ?? defaults.maxAttempts };
  }
  if (Array.isArray(retry)) {
    if (retry.length === 0 || !retry.every(isDelay)) {
      refuse(
        'retry',
        retry,
        `a non-empty list of delays in ms (integers from 0 to ${MAX_DELAY_MS})`,
      );
    }
    return {
      retry: [...(retry as number[])],
      maxAttempts: (maxAttempts as number) ?? retry.length + 1,
    };
  }
  if (typeof retry !== 'object' || retry === null) {
    refuse('retry', retry, '{ baseMs, maxMs, jitter } or a list of delays in ms');
  }
  const base = isSchedule(defaults.retry) ? undefined : defaults.retry;
  const settings = { ...base, ...(retry as Partial<BackoffSettings>) };
  for (const field of ['baseMs', 'maxMs'] as const) {
    const value = settings[field];
    if (!isDelay(value) || value < 1) {
      refuse(`retry.${field}`, value, `an integer from 1 to ${MAX_DELAY_MS}`);
    }
  }
  if (typeof settings.jitter !== 'number' || !(settings.jitter >= 0 && settings.jitter <= 1)) {
    refuse('retry.jitter', settings.jitter, 'a number from 0 to 1');
  }
  if (settings.maxMs! < settings.baseMs!) {
    refuse('retry.maxMs', settings.maxMs, `at least retry.baseMs (${settings.baseMs})`);
  }
  return {
    retry: settings as BackoffSettings,
    maxAttempts: (maxAttempts as number) ?? defaults.maxAttempts,
  };
}

/** A handler's declaration with the module's `handlers` option for it applied over it. */
export function withOverride<
  T extends {
    name: string;
    location: string;
    timeoutMs?: number;
    retry?: unknown;
    maxAttempts?: number;
    ordered?: unknown;
    maxConcurrent?: unknown;
    rate?: unknown;
    limitPerPartition?: unknown;
  },
>(
  declared: T,
  override: Partial<
    Pick<
      T,
      | 'timeoutMs'
      | 'retry'
      | 'maxAttempts'
      | 'ordered'
      | 'maxConcurrent'
      | 'rate'
      | 'limitPerPartition'
    >
  >,
): T {
  const replacesRetry = override.retry !== undefined;
  return {
    ...declared,
    location: `${declared.location} (with handlers.${declared.name} of the module options)`,
    timeoutMs: override.timeoutMs ?? declared.timeoutMs,
    retry: replacesRetry ? override.retry : declared.retry,
    maxAttempts: replacesRetry
      ? override.maxAttempts
      : (override.maxAttempts ?? declared.maxAttempts),
    ordered: override.ordered ?? declared.ordered,
    maxConcurrent: override.maxConcurrent ?? declared.maxConcurrent,
    rate: override.rate ?? declared.rate,
    limitPerPartition: override.limitPerPartition ?? declared.limitPerPartition,
  };
}
