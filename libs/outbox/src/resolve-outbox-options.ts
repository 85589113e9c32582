import 'reflect-metadata';
import { plainToInstance } from 'class-transformer';
import { validateSync, type ValidationError } from 'class-validator';
import { InvalidOutboxOptionsError } from './outbox.errors';
import {
  LEASE_SETTLE_HEADROOM_MS,
  OutboxModuleOptions,
  TUNING_ALIASES,
  type ResolvedOutboxOptions,
  type TuningAlias,
} from './outbox.options';

/** The deprecated top-level tuning fields an options object sets, in the order of the list. */
export function deprecatedTuningFields(input: OutboxModuleOptions | undefined): TuningAlias[] {
  return TUNING_ALIASES.filter((field) => input?.[field] !== undefined);
}

/**
 * Applies defaults and validates, without Nest, so it can be tested on its own and fails the
 * boot with one error listing every bad field.
 */
export function resolveOutboxOptions(input: OutboxModuleOptions = {}): ResolvedOutboxOptions {
  const options = plainToInstance(OutboxModuleOptions, input ?? {}, {
    exposeDefaultValues: true,
  });
  const problems = validateSync(options, {
    whitelist: true,
    forbidNonWhitelisted: true,
    forbidUnknownValues: true,
  }).flatMap((error) => flatten(error, ''));
  // A relation between two fields is only worth reporting once both are valid on their own.
  const reported = new Set(problems.map((p) => p.path));
  problems.push(...crossFieldProblems(options).filter((p) => !reported.has(p.path)));
  problems.push(...moveTuningAliases(input, options).filter((p) => !reported.has(p.path)));
  if (problems.length > 0) throw new InvalidOutboxOptionsError(problems);
  return options as unknown as ResolvedOutboxOptions;
}

/**
 * Puts each deprecated top-level tuning field where the module reads it, under `tuning`; one set
 * in both places is refused rather than one of them silently ignored.
 */
function moveTuningAliases(
  input: OutboxModuleOptions | undefined,
  options: OutboxModuleOptions,
): OptionProblem[] {
  const problems: OptionProblem[] = [];
  // A `tuning` that is no object is already reported; there is nowhere to move a field to.
  const tuning = (typeof options.tuning === 'object' ? options.tuning : {}) as Record<
    TuningAlias,
    unknown
  >;
  for (const field of deprecatedTuningFields(input)) {
    if (input?.tuning?.[field] !== undefined) {
      problems.push({
        path: field,
        value: input[field],
        messages: [`${field} is also set as tuning.${field}; set tuning.${field} alone`],
      });
    } else {
      tuning[field] = options[field];
    }
  }
  for (const field of TUNING_ALIASES) delete options[field];
  return problems;
}

export interface OptionProblem {
  path: string;
  value: unknown;
  messages: string[];
}

function flatten(error: ValidationError, parent: string): OptionProblem[] {
  const path = parent ? `${parent}.${error.property}` : error.property;
  const own = error.constraints
    ? [{ path, value: error.value as unknown, messages: messagesOf(error, path) }]
    : [];
  return [...own, ...(error.children ?? []).flatMap((child) => flatten(child, path))];
}

/** Text where a number belongs gets one message that says so, not a list of range checks. */
function messagesOf(error: ValidationError, path: string): string[] {
  const constraints = error.constraints ?? {};
  const numeric = 'isInt' in constraints || 'isNumber' in constraints;
  if (numeric && typeof error.value === 'string') {
    return [`${path} must be a number; text is taken only when it reads as one, such as "5"`];
  }
  return Object.values(constraints);
}

const MIN_DEAD_RETRY_MS = 1000;

function crossFieldProblems(options: OutboxModuleOptions): OptionProblem[] {
  const problems: OptionProblem[] = [];
  const { leaseMs, handlerTimeoutMs, listen, retry, deadRetryMs, deadRetryByType } = options;
  const deadRetryProblem = (path: string, value: unknown) =>
    Number.isInteger(value) && (value === 0 || (value as number) >= MIN_DEAD_RETRY_MS)
      ? []
      : [
          {
            path,
            value,
            messages: [
              `${path} must be 0 (no automatic replay) or an integer of at least ${MIN_DEAD_RETRY_MS}`,
            ],
          },
        ];
  if (Number.isInteger(deadRetryMs)) problems.push(...deadRetryProblem('deadRetryMs', deadRetryMs));
  for (const [type, value] of Object.entries(deadRetryByType ?? {})) {
    problems.push(...deadRetryProblem(`deadRetryByType.${type}`, value));
  }
  if (
    Number.isInteger(leaseMs) &&
    Number.isInteger(handlerTimeoutMs) &&
    leaseMs! < handlerTimeoutMs! + LEASE_SETTLE_HEADROOM_MS
  ) {
    problems.push({
      path: 'leaseMs',
      value: leaseMs,
      messages: [
        `leaseMs must cover handlerTimeoutMs (${handlerTimeoutMs}) plus ${LEASE_SETTLE_HEADROOM_MS} ms to settle, so a claimed event is settled before another instance may claim it`,
      ],
    });
  }
  if (listen && listen.reconnectMaxMs! < listen.reconnectMinMs!) {
    problems.push({
      path: 'listen.reconnectMaxMs',
      value: listen.reconnectMaxMs,
      messages: [
        `listen.reconnectMaxMs must be at least listen.reconnectMinMs (${listen.reconnectMinMs})`,
      ],
    });
  }
  if (retry && retry.maxMs! < retry.baseMs!) {
    problems.push({
      path: 'retry.maxMs',
      value: retry.maxMs,
      messages: [`retry.maxMs must be at least retry.baseMs (${retry.baseMs})`],
    });
  }
  return problems;
}
