import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

@Entity({ name: 'organization' })
export class Organization {
  @PrimaryColumn('uuid') id!: string;
  @Column('text') name!: string;
  /** SHA-256 of the organization's API key (see api-keys.ts); never selected unless asked. */
  @Column({ name: 'api_key_hash', type: 'bytea', nullable: true, select: false })
  apiKeyHash!: Buffer | null;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt!: Date;
}
