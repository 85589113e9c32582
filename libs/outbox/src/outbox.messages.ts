import { scrubError } from './common/scrub-error.util';
import { ISOLATION_LEVELS } from './outbox.constants';

/** Every message the module raises, in one place so wording stays consistent. */
export const OutboxMessages = {
  transactionRequired: (operation: string) =>
    `${operation} must run inside a transaction, so the event commits or rolls back with your ` +
    `changes. Either pass the EntityManager of an open TypeORM transaction ` +
    `(dataSource.transaction(manager => outbox.emit(event, { manager }))), or, with ` +
    `@nestjs-cls/transactional and its TypeORM adapter, emit inside @Transactional() or ` +
    `txHost.withTransaction(...)`,
  payloadNotSerializable: (eventType: string, path: string, reason: string) =>
    `Outbox event "${eventType}" is not JSON-serialisable: ${path} is ${reason}`,
  invalidEvent: (field: string, value: unknown, expected: string) =>
    `Invalid outbox event: ${field} must be ${expected}, got ${scrubError(describeValue(value))}`,
  invalidOptions: (problems: ReadonlyArray<{ path: string; value: unknown; messages: string[] }>) =>
    `Invalid OutboxModule options:\n` +
    problems
      .map((p) => scrubError(`  - ${p.path} = ${describeValue(p.value)}: ${p.messages.join('; ')}`))
      .join('\n'),
  deprecatedTuningOptions: (fields: readonly string[]) =>
    `OutboxModule ${fields.length === 1 ? 'option' : 'options'} ${fields.join(', ')} ` +
    `${fields.length === 1 ? 'is' : 'are'} deprecated and still read: set ` +
    `${fields.map((field) => `tuning.${field}`).join(', ')} instead`,
  invalidMigrationsOption: (field: string, value: unknown, expected: string) =>
    `Invalid outboxMigrations() option: ${field} = ${describeValue(value)}: must be ${expected}`,
  invalidHandlerName: (name: unknown, location: string) =>
    `Outbox handler name ${describeValue(name)} on ${location} must be kebab-case ` +
    `(lowercase letters and digits separated by single dashes, for example "webhook-fanout")`,
  duplicateHandler: (name: string, eventType: string, locations: readonly [string, string]) =>
    `Outbox handler name "${name}" is used twice for event type "${eventType}": ` +
    `${locations[0]} and ${locations[1]}; give each handler its own name`,
  scopedHandler: (name: string, location: string) =>
    `Outbox handler "${name}" on ${location} belongs to a request- or transient-scoped provider; ` +
    `outbox handlers run outside any request, so the provider must be a singleton`,
  unreachableHandler: (name: string, location: string) =>
    `Outbox handler "${name}" on ${location} has no instance the outbox can call at boot; ` +
    `register its class as a singleton provider (class, factory or value) of a module in the app`,
  claimFunctionMissing: (name: string, migration: string, lookAgainMs: number) =>
    `Outbox claim function ${name} not found through search_path: until migration ` +
    `${migration} has run, the server parses and plans every claim afresh ` +
    `(looked up again every ${lookAgainMs / 1000} s)`,
  fairClaimMissing: (lookAgainMs: number) =>
    `Outbox fair claims need migrations OutboxFairClaims1775000000000 and ` +
    `OutboxFairIndex1775500000000 (the function outbox_claim_fair_v1 and a valid index ` +
    `outbox_event_fair_idx, through search_path): until both have run, claims go in due order ` +
    `(looked up again every ${lookAgainMs / 1000} s)`,
  limitUnasked: (handler: string, message: string, missing: boolean) =>
    `Outbox could not ask the limit of handler "${handler}", so its run waits 1 s and tries ` +
    `again: ` +
    (missing
      ? `limits need migration OutboxHandlerLimits1776000000000 (the table ` +
        `outbox_handler_limit and the function outbox_limit_admit_v1, through search_path)`
      : message),
  unhandledType: (eventType: string) =>
    `Outbox event type "${eventType}" has no handler in this application: its events are marked ` +
    `delivered without running anything. Subscribe a handler to it, or stop emitting it`,
  unclaimedType: (eventType: string, handlers: readonly string[], types: readonly string[]) =>
    `Outbox handler(s) ${handlers.join(', ')} subscribe to "${eventType}", which this instance ` +
    `never claims (types: ${types.join(', ')}); they run only on an instance whose types ` +
    `include it or that has no types filter`,
  emptyHandlerEvents: (name: string, location: string, events: unknown) =>
    `Outbox handler "${name}" on ${location} subscribes to no event: events must be '*' or a ` +
    `non-empty list of event types, got ${describeValue(events)}`,
  invalidHandlerTimeout: (name: string, location: string, timeoutMs: unknown, leaseMs: number) =>
    `Outbox handler "${name}" on ${location} has timeoutMs ${describeValue(timeoutMs)}: it must ` +
    `be an integer from 1, and the lease (leaseMs ${leaseMs}) must cover it plus 1000 ms to ` +
    `settle, so a claimed event is settled before another instance may claim it`,
  invalidHandlerLimit: (
    name: string,
    location: string,
    field: string,
    value: unknown,
    expected: string,
  ) =>
    `Outbox handler "${name}" on ${location} has the limit ${field} ${describeValue(value)}: ` +
    `it must be ${expected}`,
  invalidHandlerPolicy: (
    name: string,
    location: string,
    field: string,
    value: unknown,
    expected: string,
  ) =>
    `Outbox handler "${name}" on ${location} has ${field} ${describeValue(value)}: it must be ` +
    expected,
  handlerTimeout: (name: string, budgetMs: number) =>
    `Outbox handler "${name}" did not finish within its ${budgetMs} ms budget`,
  leaseLost: (name: string, eventId: string, attempt: number) =>
    `Outbox handler "${name}" finished attempt ${attempt} of event ${eventId} after its claim ` +
    `was lost (the lease ran out and the event was claimed again); its transaction was rolled ` +
    `back and the current claim runs it`,
  invalidHandlerTransaction: (name: string, location: string, transaction: unknown) =>
    `Outbox handler "${name}" on ${location} has transaction ${describeValue(transaction)}: it ` +
    `must be true, false, or { isolationLevel } with one of ${ISOLATION_LEVELS.join(', ')}`,
  transactionsUnavailable: (name: string, location: string) =>
    `Outbox handler "${name}" on ${location} is transactional, but this EventDispatcher has no ` +
    `DataSource to open its transactions on: register it through OutboxModule`,
  handlerTransactionEnded: (name: string) =>
    `Outbox handler "${name}" used its transaction after it ended; await every write and ` +
    `ctx.emit before the handler returns`,
  storeFailure: (operation: string, detail: string) => `Outbox ${operation} failed: ${detail}`,
  eventConflict: (eventId: string, storedType: string) =>
    `Outbox event id ${eventId} is already used by a different event (stored type ` +
    `"${storedType}"); emitting it again must repeat the same content, or use a new id`,
  invalidAdminQuery: (field: string, value: unknown, expected: string) =>
    `OutboxAdmin: ${field} must be ${expected}, got ${briefValue(value)}`,
  adminChangeInProgress: (
    kind: string,
    running: { kind: string; actor: string | null; startedAt: Date; expiresAt: Date } | null,
  ) =>
    `OutboxAdmin: cannot ${kind} by filter now: ` +
    (running
      ? `a ${running.kind} by filter by ${running.actor ?? 'an unnamed actor'}, started at ` +
        `${running.startedAt.toISOString()}, is running (its claim ends by ` +
        `${running.expiresAt.toISOString()} at the latest)`
      : 'another change by filter is starting') +
    `. One change by filter runs at a time; try again once it has ended`,
  invalidDashboardOption: (field: string, value: unknown, expected: string) =>
    `OutboxDashboardModule: ${field} must be ${expected}, got ${briefValue(value)}`,
  invalidTestingOption: (helper: string, field: string, value: unknown, expected: string) =>
    `${helper}: ${field} must be ${expected}, got ${String(value)}`,
  notIdle: (bound: string, claimed: number, claims: number) =>
    `the outbox was not idle after ${bound}: ${claimed} events claimed in ${claims} claims ` +
    `(does a handler emit an event for every event it handles?)`,
} as const;

/** A value as an operator typed it, cut short: it is echoed back in an error. */
function briefValue(value: unknown): string {
  const text = typeof value === 'string' ? JSON.stringify(value) : String(value);
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}

export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (value === undefined) return 'undefined';
  try {
    return JSON.stringify(value) ?? Object.prototype.toString.call(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}
