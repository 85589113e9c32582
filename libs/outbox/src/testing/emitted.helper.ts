import type { DataSource, EntityManager } from 'typeorm';
import type { EmittedOutboxEvent, OutboxEventFilter } from '../store/testing.store';
import { TestingStore } from '../store/testing.store';
import { OutboxExpectationError } from './testing.errors';
import { firstDifference } from './partial-match.util';

/** Where to look: a transaction's `EntityManager` (sees its uncommitted writes) or a DataSource. */
export type EmittedSource = EntityManager | DataSource;

export interface ExpectedOutboxEvent<P = unknown> extends OutboxEventFilter {
  type: string;
  /** Matched as a partial: every property given must be there and equal, others are ignored. */
  payload?: P extends object ? DeepPartial<P> : P;
}

type DeepPartial<T> = { [K in keyof T]?: T[K] extends object ? DeepPartial<T[K]> : T[K] };

/** The outbox events matching `filter`, in emit order (at most 1000). */
export async function emitted(
  source: EmittedSource,
  filter: OutboxEventFilter = {},
): Promise<EmittedOutboxEvent[]> {
  const { dataSource, manager } = split(source);
  const result = await new TestingStore(dataSource).findEvents(filter, { manager });
  if (!result.ok) throw result.error;
  return result.value;
}

/**
 * The one event of `expected.type` (and the other filter fields) whose payload matches
 * `expected.payload`. Throws `OutboxExpectationError` naming what was emitted instead, or that
 * several events match. Framework-free: works in Jest, Vitest and `node:test`.
 */
export async function expectEmitted<P = unknown>(
  source: EmittedSource,
  expected: ExpectedOutboxEvent<P>,
): Promise<EmittedOutboxEvent<P>> {
  const { payload, ...filter } = expected;
  const candidates = await emitted(source, filter);
  const matching = candidates.filter(
    (event) => payload === undefined || firstDifference(event.payload, payload) === null,
  );
  if (matching.length === 1) return matching[0] as EmittedOutboxEvent<P>;
  if (matching.length > 1) {
    throw new OutboxExpectationError(
      `expected one outbox event of type "${expected.type}" to match, ${matching.length} do: ` +
        matching.map((event) => event.id).join(', '),
    );
  }
  const all = await emitted(source, {});
  const near = candidates
    .slice(0, DESCRIBED_EVENTS)
    .map((event) => `${event.id}: payload${firstDifference(event.payload, payload) ?? ''} differs`);
  throw new OutboxExpectationError(
    `expected an outbox event of type "${expected.type}"` +
      (payload === undefined ? '' : ' with a matching payload') +
      `; ${describe(all)}` +
      (near.length > 0 ? `; of that type: ${near.join('; ')}` : ''),
  );
}

/** Throws `OutboxExpectationError` when an event matches `filter`. */
export async function expectNotEmitted(
  source: EmittedSource,
  filter: OutboxEventFilter,
): Promise<void> {
  const found = await emitted(source, filter);
  if (found.length > 0) {
    throw new OutboxExpectationError(`expected no outbox event to match, ${describe(found)}`);
  }
}

// Types and ids only: payloads may hold what must not reach a log, CI output included.
function describe(events: readonly EmittedOutboxEvent[]): string {
  if (events.length === 0) return 'none was emitted';
  const shown = events.slice(0, DESCRIBED_EVENTS).map((event) => `${event.type} (${event.id})`);
  const more = events.length - shown.length;
  return `emitted: ${shown.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}

/** Events a failed expectation names, so a busy test's message stays readable. */
const DESCRIBED_EVENTS = 20;

function split(source: EmittedSource): { dataSource: DataSource; manager?: EntityManager } {
  // By shape, not instanceof: a second copy of typeorm must work too.
  if ('connection' in source) return { dataSource: source.connection, manager: source };
  return { dataSource: source };
}
