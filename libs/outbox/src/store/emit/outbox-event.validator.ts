import { v7 as uuidv7 } from 'uuid';
import { InvalidOutboxEventError, OutboxPayloadNotSerializableError } from '../../outbox.errors';
import type { NewOutboxEvent } from '../../outbox-event.types';
import { isUuid } from '../../common/uuid.util';
import type { EventRow } from '../event-row.mapping';
import { findJsonProblem, findTextProblem } from './json-serializable.util';

/**
 * An event ready for the enqueue statement: the row's columns (the database sets
 * `occurred_at`), JSON-safe values, an id.
 */
export type OutboxRow = Omit<EventRow, 'occurred_at'> & { partition_key: string | null };

/**
 * Checks one event and shapes it for the enqueue statement. Throws a typed error naming the
 * field and value (or the event type and the path of the unserialisable part), so a bad event
 * is refused before anything reaches the database.
 */
export function toOutboxRow(event: NewOutboxEvent): OutboxRow {
  if (typeof event !== 'object' || event === null) {
    throw new InvalidOutboxEventError('event', event, 'an object');
  }
  const type = requireText('type', event.type);
  // PostgreSQL returns uuids in lowercase; the caller gets back the id handlers will see.
  const canonicalId = requireUuid('id', event.id === undefined ? uuidv7() : event.id);
  const causationId = event.causationId ?? null;
  const metadata = event.metadata ?? {};
  if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
    throw new InvalidOutboxEventError('metadata', metadata, 'a JSON object');
  }
  assertJson(type, 'payload', event.payload);
  assertJson(type, 'metadata', metadata);
  return {
    id: canonicalId,
    type,
    aggregate_type: requireText('aggregateType', event.aggregateType),
    aggregate_id: requireText('aggregateId', event.aggregateId),
    organization_id: optionalText('organizationId', event.organizationId),
    request_id: optionalText('requestId', event.requestId),
    payload: event.payload,
    metadata,
    causation_id: causationId === null ? null : requireUuid('causationId', causationId),
    correlation_id: optionalText('correlationId', event.correlationId),
    ordering_key: optionalKey('orderingKey', event.orderingKey),
    partition_key: optionalKey('partitionKey', event.partitionKey),
  };
}

function requireUuid(field: string, value: unknown): string {
  if (!isUuid(value)) {
    throw new InvalidOutboxEventError(field, value, 'a UUID');
  }
  return value.toLowerCase();
}

/** Longest part of a refused text field echoed back in the error. */
const MAX_ECHOED_LENGTH = 64;

function requireText(field: string, value: unknown): string {
  if (typeof value !== 'string' || value.trim() === '') {
    throw new InvalidOutboxEventError(field, value, 'a non-empty string');
  }
  // PostgreSQL text refuses NUL and replaces a lone surrogate with U+FFFD, so neither is stored
  // as given. Only the start of the value is echoed: the message stays short.
  const problem = findTextProblem(value);
  if (problem) {
    const excerpt =
      value.length > MAX_ECHOED_LENGTH ? `${value.slice(0, MAX_ECHOED_LENGTH)}…` : value;
    throw new InvalidOutboxEventError(field, excerpt, `a string not ${problem}`);
  }
  return value;
}

function optionalText(field: string, value: unknown): string | null {
  if (value === undefined || value === null) return null;
  return requireText(field, value);
}

/**
 * Longest ordering or partition key: a key is compared and indexed on every ordered (or fair)
 * claim.
 */
export const MAX_ORDERING_KEY_LENGTH = 256;

function optionalKey(field: 'orderingKey' | 'partitionKey', value: unknown): string | null {
  const key = optionalText(field, value);
  if (key !== null && key.length > MAX_ORDERING_KEY_LENGTH) {
    throw new InvalidOutboxEventError(
      field,
      `${key.slice(0, MAX_ECHOED_LENGTH)}…`,
      `a string of at most ${MAX_ORDERING_KEY_LENGTH} characters (got ${key.length})`,
    );
  }
  return key;
}

function assertJson(eventType: string, root: string, value: unknown): void {
  const problem = findJsonProblem(value, root);
  if (problem) throw new OutboxPayloadNotSerializableError(eventType, problem.path, problem.reason);
}
