import { Column, Entity, PrimaryColumn } from 'typeorm';

export type InvoiceStatus = 'issued' | 'paid';

@Entity({ name: 'invoice' })
export class Invoice {
  @PrimaryColumn('uuid') id!: string;
  @Column({ name: 'organization_id', type: 'uuid' }) organizationId!: string;
  @Column('text') number!: string;
  @Column({ name: 'amount_cents', type: 'integer' }) amountCents!: number;
  @Column('text') currency!: string;
  @Column('text') status!: InvoiceStatus;
  @Column({ name: 'issued_at', type: 'timestamptz', default: () => 'now()' }) issuedAt!: Date;
  @Column({ name: 'paid_at', type: 'timestamptz', nullable: true }) paidAt!: Date | null;
}
