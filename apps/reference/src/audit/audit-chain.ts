import { createHash } from 'node:crypto';
import { canonicalJson } from './canonical-json';

/** `prev_hash` of the first entry. */
export const GENESIS_HASH = '0'.repeat(64);

/**
 * Key of the transaction-scoped advisory lock that serialises appends to the chain, across
 * every instance of the app ("audit" in ASCII). Only the audit log takes it.
 */
export const AUDIT_CHAIN_LOCK_KEY = 0x61_75_64_69_74;

/** What an entry's hash covers, besides the previous hash. */
export interface AuditContent {
  eventId: string;
  type: string;
  aggregateType: string;
  aggregateId: string;
  organizationId: string | null;
  requestId: string | null;
  /** ISO 8601 with milliseconds, as `Date.prototype.toISOString` writes it. */
  occurredAt: string;
  payload: unknown;
  seq: number;
}

/** `sha256(prevHash + canonicalJson(content))`, in lowercase hex. */
export function chainHash(prevHash: string, content: AuditContent): string {
  const canonical = canonicalJson({
    eventId: content.eventId,
    type: content.type,
    aggregateType: content.aggregateType,
    aggregateId: content.aggregateId,
    organizationId: content.organizationId,
    requestId: content.requestId,
    occurredAt: content.occurredAt,
    payload: content.payload,
    seq: content.seq,
  });
  return createHash('sha256')
    .update(prevHash + canonical, 'utf8')
    .digest('hex');
}
