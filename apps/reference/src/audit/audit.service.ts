import { Injectable } from '@nestjs/common';
import { DataSource, MoreThan } from 'typeorm';
import { AuditEntry } from './audit-entry.entity';
import { GENESIS_HASH, chainHash, type AuditContent } from './audit-chain';
import type { ListAuditQuery } from './audit.dto';

/** An entry as the API shows it: the hashed content and its links. */
export interface AuditEntryView extends AuditContent {
  prevHash: string;
  hash: string;
  recordedAt: string;
}

export type ChainVerification =
  | { valid: true; entries: number }
  | {
      valid: false;
      /** Entries in the chain, the broken ones included. */
      entries: number;
      /** `seq` of the first entry whose link does not hold; entries before it are intact. */
      firstBrokenSeq: number;
      eventId: string;
      reason: string;
    };

const DEFAULT_LIMIT = 100;
const VERIFY_BATCH = 500;

/** Reads the audit log and checks its hash chain. */
@Injectable()
export class AuditService {
  constructor(private readonly dataSource: DataSource) {}

  /** The organization's entries, newest first (highest `seq` first), at most `limit`. */
  async list(organizationId: string, query: ListAuditQuery): Promise<AuditEntryView[]> {
    const entries = await this.dataSource.getRepository(AuditEntry).find({
      where: { organizationId },
      order: { seq: 'DESC' },
      take: query.limit ?? DEFAULT_LIMIT,
    });
    return entries.map(toView);
  }

  /**
   * Recomputes the chain in `seq` order from the genesis hash and reports the first entry whose
   * `seq` does not follow its predecessor's, whose `prev_hash` is not its predecessor's `hash`,
   * or whose `hash` does not match its content. Reads one snapshot, in batches.
   */
  verify(): Promise<ChainVerification> {
    return this.dataSource.transaction('REPEATABLE READ', async (manager) => {
      const repository = manager.getRepository(AuditEntry);
      const entries = await repository.count();
      let expectedSeq = 1;
      let prevHash = GENESIS_HASH;
      for (;;) {
        const batch = await repository.find({
          where: { seq: MoreThan(String(expectedSeq - 1)) },
          order: { seq: 'ASC' },
          take: VERIFY_BATCH,
        });
        for (const entry of batch) {
          const seq = Number(entry.seq);
          const reason = brokenLink(entry, seq, expectedSeq, prevHash);
          if (reason) {
            return { valid: false, entries, firstBrokenSeq: seq, eventId: entry.eventId, reason };
          }
          expectedSeq = seq + 1;
          prevHash = entry.hash;
        }
        if (batch.length < VERIFY_BATCH) return { valid: true, entries };
      }
    });
  }
}

function brokenLink(
  entry: AuditEntry,
  seq: number,
  expectedSeq: number,
  prevHash: string,
): string | undefined {
  if (seq !== expectedSeq) {
    const missing = seq > expectedSeq ? `: entries ${expectedSeq}..${seq - 1} are missing` : '';
    return `seq ${seq} where ${expectedSeq} was expected${missing}`;
  }
  if (entry.prevHash !== prevHash) {
    return seq === 1
      ? 'prev_hash of the first entry is not the genesis hash'
      : `prev_hash does not match the hash of entry ${seq - 1}`;
  }
  const { prevHash: _prev, hash: stored, recordedAt, ...content } = toView(entry);
  if (stored !== chainHash(entry.prevHash, { ...content, seq })) {
    return 'hash does not match the entry content';
  }
  return undefined;
}

function toView(entry: AuditEntry): AuditEntryView {
  return {
    seq: Number(entry.seq),
    eventId: entry.eventId,
    type: entry.eventType,
    aggregateType: entry.aggregateType,
    aggregateId: entry.aggregateId,
    organizationId: entry.organizationId,
    requestId: entry.requestId,
    occurredAt: entry.occurredAt.toISOString(),
    payload: entry.payload,
    prevHash: entry.prevHash,
    hash: entry.hash,
    recordedAt: entry.recordedAt.toISOString(),
  };
}
