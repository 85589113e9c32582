import { Column, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'audit_entry' })
export class AuditEntry {
  @PrimaryColumn({ name: 'event_id', type: 'uuid' }) eventId!: string;
  @Column({ type: 'bigint' }) seq!: string;
  @Column({ name: 'event_type', type: 'text' }) eventType!: string;
  @Column({ name: 'aggregate_type', type: 'text' }) aggregateType!: string;
  @Column({ name: 'aggregate_id', type: 'text' }) aggregateId!: string;
  @Column({ name: 'organization_id', type: 'text', nullable: true }) organizationId!: string | null;
  @Column({ name: 'request_id', type: 'text', nullable: true }) requestId!: string | null;
  @Column({ name: 'occurred_at', type: 'timestamptz' }) occurredAt!: Date;
  @Column({ type: 'jsonb' }) payload!: unknown;
  @Column({ name: 'prev_hash', type: 'text' }) prevHash!: string;
  @Column({ type: 'text' }) hash!: string;
  @Column({ name: 'recorded_at', type: 'timestamptz', default: () => 'now()' }) recordedAt!: Date;
}
