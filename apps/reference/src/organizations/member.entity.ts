import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';

export type MemberRole = 'admin' | 'member';

@Entity({ name: 'member' })
export class Member {
  @PrimaryColumn('uuid') id!: string;
  @Column({ name: 'organization_id', type: 'uuid' }) organizationId!: string;
  @Column('text') email!: string;
  @Column('text') role!: MemberRole;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt!: Date;
}
