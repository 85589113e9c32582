import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'mail_log' })
export class MailLog {
  @PrimaryColumn({ name: 'idempotency_key', type: 'text' }) idempotencyKey!: string;
  /** The organization the mail was sent for; null for mails logged before it was kept. */
  @Column({ name: 'organization_id', type: 'uuid', nullable: true }) organizationId!: string | null;
  @Column('text') recipient!: string;
  @Column('text') subject!: string;
  @Column('text') body!: string;
  @Column('text') transport!: 'smtp' | 'recorded';
  /** When a sender last took the key; another may take it over once the send must have ended. */
  @Column({ name: 'claimed_at', type: 'timestamptz', default: () => 'now()' }) claimedAt!: Date;
  @Column({ name: 'sent_at', type: 'timestamptz', nullable: true }) sentAt!: Date | null;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt!: Date;
}
