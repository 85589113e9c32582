import { Check, Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { OUTBOX_TABLE } from '../outbox.constants';

/** A handler's failures for one event, as the `failures` column keeps them. */
export interface HandlerFailure {
  /** Attempts in which this handler failed. */
  count: number;
  /** When the handler may run again (ISO time of the database clock); null once it used its attempts. */
  retryAt: string | null;
}

/**
 * The outbox row, mapped for schema checks and read access. It mirrors the migration in
 * `migrations/` column for column; writes go through the stores beside it, whose SQL uses the
 * database clock rather than values set here.
 */
@Entity({ name: OUTBOX_TABLE })
@Check('outbox_event_deliveries_is_object', `jsonb_typeof(deliveries) = 'object'`)
@Index('outbox_event_due_idx', ['nextAttemptAt', 'id'], {
  where: 'dispatched_at IS NULL AND dead_at IS NULL',
})
@Index('outbox_event_dead_retry_idx', ['nextAttemptAt', 'id'], {
  where: 'dispatched_at IS NULL AND dead_at IS NOT NULL AND discarded_at IS NULL',
})
@Index('outbox_event_dead_idx', ['deadAt', 'id'], {
  where: 'dispatched_at IS NULL AND dead_at IS NOT NULL',
})
@Index('outbox_event_discarded_idx', ['discardedAt'], {
  where: 'dispatched_at IS NULL AND discarded_at IS NOT NULL',
})
@Index('outbox_event_leased_idx', ['leaseExpiresAt'], {
  where: 'dispatched_at IS NULL AND lease_expires_at IS NOT NULL',
})
@Index('outbox_event_dispatched_idx', ['dispatchedAt'], { where: 'dispatched_at IS NOT NULL' })
@Index('outbox_event_ordering_idx', ['orderingKey', 'orderingPosition'], {
  where: 'ordering_position IS NOT NULL AND dispatched_at IS NULL AND discarded_at IS NULL',
})
@Index('outbox_event_blocked_idx', ['deadAt', 'id'], {
  where:
    "dispatched_at IS NULL AND dead_at IS NOT NULL AND discarded_at IS NULL AND ordered_for <> '{}'",
})
@Index('outbox_event_ordered_retry_idx', ['occurredAt'], {
  where: 'dispatched_at IS NULL AND dead_at IS NULL AND failures ?| ordered_for',
})
@Index('outbox_event_organization_type_idx', ['organizationId', 'type', 'occurredAt', 'id'], {
  where: 'organization_id IS NOT NULL',
})
// An index on an expression, which @Index cannot declare: TypeORM is told to leave it alone.
@Index('outbox_event_fair_idx', { synchronize: false })
export class OutboxEventEntity {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'outbox_event_pkey' })
  id!: string;

  @Column({ type: 'text' })
  type!: string;

  @Column({ name: 'aggregate_type', type: 'text' })
  aggregateType!: string;

  @Column({ name: 'aggregate_id', type: 'text' })
  aggregateId!: string;

  @Column({ name: 'organization_id', type: 'text', nullable: true })
  organizationId!: string | null;

  @Column({ name: 'request_id', type: 'text', nullable: true })
  requestId!: string | null;

  @Column({ type: 'jsonb' })
  payload!: unknown;

  // A JSON value, not a raw SQL default: TypeORM strips the `::jsonb` cast from what it reads
  // back from PostgreSQL but keeps it in a raw default, so `() => "'{}'::jsonb"` shows as a
  // permanent schema diff. A value is compared as parsed JSON and still emits `DEFAULT '{}'`.
  @Column({ type: 'jsonb', default: {} })
  metadata!: Record<string, unknown>;

  @Column({ name: 'occurred_at', type: 'timestamptz', default: () => 'now()' })
  occurredAt!: Date;

  @Column({ type: 'integer', default: 0 })
  attempts!: number;

  @Column({ name: 'lease_expires_at', type: 'timestamptz', nullable: true })
  leaseExpiresAt!: Date | null;

  @Column({ name: 'next_attempt_at', type: 'timestamptz', default: () => 'now()' })
  nextAttemptAt!: Date;

  @Column({ name: 'dispatched_at', type: 'timestamptz', nullable: true })
  dispatchedAt!: Date | null;

  @Column({ name: 'dead_at', type: 'timestamptz', nullable: true })
  deadAt!: Date | null;

  // See `metadata` for why the default is a JSON value.
  @Column({ type: 'jsonb', default: {} })
  deliveries!: Record<string, string>;

  @Column({ name: 'last_error', type: 'text', nullable: true })
  lastError!: string | null;

  @Column({ name: 'causation_id', type: 'uuid', nullable: true })
  causationId!: string | null;

  @Column({ name: 'correlation_id', type: 'text', nullable: true })
  correlationId!: string | null;

  @Column({ name: 'ordering_key', type: 'text', nullable: true })
  orderingKey!: string | null;

  @Column({ name: 'ordering_position', type: 'bigint', nullable: true })
  orderingPosition!: string | null;

  @Column({ name: 'ordered_for', type: 'text', array: true, nullable: true })
  orderedFor!: string[] | null;

  /** The partition fair claims share out by, when the emitter named one (`partitionKey`). */
  @Column({ name: 'partition_key', type: 'text', nullable: true })
  partitionKey!: string | null;

  // See `metadata` for why the default is a JSON value.
  @Column({ type: 'jsonb', default: {} })
  failures!: Record<string, HandlerFailure>;

  @Column({ name: 'discarded_at', type: 'timestamptz', nullable: true })
  discardedAt!: Date | null;

  @Column({ name: 'discard_reason', type: 'text', nullable: true })
  discardReason!: string | null;
}

/** Entities to add to the application's TypeORM configuration. */
export const OUTBOX_ENTITIES = [OutboxEventEntity] as const;
