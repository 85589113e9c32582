import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'webhook_endpoint' })
export class WebhookEndpoint {
  @PrimaryColumn('uuid') id!: string;
  @Column({ name: 'organization_id', type: 'uuid' }) organizationId!: string;
  @Column('text') url!: string;
  /** `whsec_...`, per the Standard Webhooks specification. Never returned after creation. */
  @Column('text') secret!: string;
  @Column({ name: 'event_types', type: 'text', array: true }) eventTypes!: string[];
  @Column({ type: 'boolean', default: true }) enabled!: boolean;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt!: Date;
}
