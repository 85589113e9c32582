import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'mail_log' })
export class MailLog {
  @PrimaryColumn({ name: 'idempotency_key', type: 'text' }) idempotencyKey!: string;
  @Column('text') recipient!: string;
  @Column('text') subject!: string;
  @Column('text') body!: string;
  @Column('text') transport!: 'smtp' | 'recorded';
  /** When a sender last took the key; another may take it over once the send must have ended. */
  @Column({ name: 'claimed_at', type: 'timestamptz', default: () => 'now()' }) claimedAt!: Date;
  @Column({ name: 'sent_at', type: 'timestamptz', nullable: true }) sentAt!: Date | null;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt!: Date;
}
