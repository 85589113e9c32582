import { Injectable } from '@nestjs/common';
import { DataSource, type EntityManager } from 'typeorm';
import { OnOutboxEvent, type OutboxEvent, type TransactionalHandlerContext } from '@app/outbox';
import { AUDIT_CHAIN_LOCK_KEY, GENESIS_HASH, chainHash } from './audit-chain';

/**
 * The `audit-log` handler: one tamper-evident audit entry per event, of every type
 * (`outbox.event.dead` included).
 *
 * Entries form a SHA-256 hash chain in the order this handler *completes*, not in `occurred_at`
 * order. Handlers run concurrently, on every instance of the app, and the outbox orders events
 * only within one claim; a chain kept in `occurred_at` order would have to insert a late event
 * between entries already written and rehash everything after it, so no entry could be trusted
 * once written. Instead each append takes one lock, links to the entry that is last at that
 * moment and commits: the chain is one linear history that only grows at its end, and `seq`
 * says in which order the log learned of the events. `occurred_at` is kept, and hashed, in
 * each entry for readers that want the business order.
 *
 * It is a transactional handler: the entry, and the outbox's record that `audit-log` has handled
 * the event, commit in one transaction. So the log holds exactly one entry per event by
 * construction, whatever crashes or lost leases happen around it, and an entry is in the chain
 * if and only if the event counts as audited. (The unique `event_id` and the check below stay,
 * for appends made outside the outbox, such as a repair script.)
 */
@Injectable()
export class AuditLogHandler {
  constructor(private readonly dataSource: DataSource) {}

  @OnOutboxEvent('audit-log', { events: '*', transaction: true })
  async handle(event: OutboxEvent, ctx: TransactionalHandlerContext): Promise<void> {
    await this.append(event, ctx.manager);
  }

  /**
   * Appends the event in `manager`'s transaction, or in a short one of its own. Returns the new
   * entry's `seq`, or `null` when the event is already in the log, in which case nothing is
   * written.
   */
  append(event: OutboxEvent, manager?: EntityManager): Promise<number | null> {
    if (manager) return this.appendIn(manager, event);
    return this.dataSource.transaction((own) => this.appendIn(own, event));
  }

  private async appendIn(manager: EntityManager, event: OutboxEvent): Promise<number | null> {
    // Serialises appenders across instances until COMMIT; released with the transaction.
    await manager.query('SELECT pg_advisory_xact_lock($1::bigint)', [AUDIT_CHAIN_LOCK_KEY]);
    // Checked under the lock, so a redelivery that raced the first delivery sees its row.
    const existing: unknown[] = await manager.query(
      'SELECT 1 FROM audit_entry WHERE event_id = $1',
      [event.id],
    );
    if (existing.length > 0) return null;

    const last: { seq: string; hash: string }[] = await manager.query(
      'SELECT seq, hash FROM audit_entry ORDER BY seq DESC LIMIT 1',
    );
    const seq = last.length > 0 ? Number(last[0].seq) + 1 : 1;
    const prevHash = last.length > 0 ? last[0].hash : GENESIS_HASH;
    const occurredAt = new Date(event.occurredAt).toISOString();
    const hash = chainHash(prevHash, {
      eventId: event.id,
      type: event.type,
      aggregateType: event.aggregateType,
      aggregateId: event.aggregateId,
      organizationId: event.organizationId,
      requestId: event.requestId,
      occurredAt,
      payload: event.payload,
      seq,
    });
    // occurred_at is written from the same ISO text that was hashed (millisecond precision),
    // so the verifier reads back exactly what went into the hash.
    const inserted: unknown[] = await manager.query(
      `INSERT INTO audit_entry
           (event_id, seq, event_type, aggregate_type, aggregate_id, organization_id, request_id,
            occurred_at, payload, prev_hash, hash)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8::timestamptz, $9::jsonb, $10, $11)
         ON CONFLICT (event_id) DO NOTHING
         RETURNING seq`,
      [
        event.id,
        seq,
        event.type,
        event.aggregateType,
        event.aggregateId,
        event.organizationId,
        event.requestId,
        occurredAt,
        JSON.stringify(event.payload),
        prevHash,
        hash,
      ],
    );
    return inserted.length > 0 ? seq : null;
  }
}
