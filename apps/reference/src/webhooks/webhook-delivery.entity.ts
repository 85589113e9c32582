import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'webhook_delivery' })
export class WebhookDelivery {
  /** `<eventId>:<endpointId>`; also the `webhook-id` header, so receivers can drop duplicates. */
  @PrimaryColumn('text') id!: string;
  @Column({ name: 'endpoint_id', type: 'uuid' }) endpointId!: string;
  @Column({ name: 'event_id', type: 'uuid' }) eventId!: string;
  @Column({ name: 'event_type', type: 'text' }) eventType!: string;
  @Column({ name: 'organization_id', type: 'text', nullable: true }) organizationId!: string | null;
  @Column({ type: 'jsonb' }) body!: unknown;
  @Column({ type: 'integer', default: 0 }) attempts!: number;
  @Column({ name: 'lease_expires_at', type: 'timestamptz', nullable: true })
  leaseExpiresAt!: Date | null;
  @Column({ name: 'next_attempt_at', type: 'timestamptz', default: () => 'now()' })
  nextAttemptAt!: Date;
  @Column({ name: 'delivered_at', type: 'timestamptz', nullable: true }) deliveredAt!: Date | null;
  @Column({ name: 'dead_at', type: 'timestamptz', nullable: true }) deadAt!: Date | null;
  @Column({ name: 'last_status', type: 'integer', nullable: true }) lastStatus!: number | null;
  @Column({ name: 'last_error', type: 'text', nullable: true }) lastError!: string | null;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt!: Date;
}
