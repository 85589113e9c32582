import { Type } from 'class-transformer';
import {
  IsEmail,
  IsIn,
  IsInt,
  IsISO4217CurrencyCode,
  IsString,
  IsUUID,
  Min,
  MinLength,
} from 'class-validator';
import { OUTBOX_EVENT_DEAD } from '@app/outbox';

/**
 * Every event type of the app in one place: its payload shape (validated before anything is
 * written), whether webhooks receive it, and who is notified.
 */

export class OrganizationCreatedPayload {
  @IsUUID() organizationId!: string;
  @IsString() @MinLength(1) name!: string;
}

export class MemberInvitedPayload {
  @IsUUID() memberId!: string;
  @IsEmail() email!: string;
  @IsIn(['admin', 'member']) role!: 'admin' | 'member';
}

export class InvoiceIssuedPayload {
  @IsUUID() invoiceId!: string;
  @IsString() @MinLength(1) number!: string;
  @Type(() => Number) @IsInt() @Min(1) amountCents!: number;
  @IsISO4217CurrencyCode() currency!: string;
}

export class InvoicePaidPayload extends InvoiceIssuedPayload {}

export type Audience = 'admins' | 'members' | 'none';

export interface NotificationRule {
  /** Who gets an in-app notification. */
  audience: Audience;
  /** Who also gets an email, through the mailer port. */
  mail: Audience | 'invitee';
  /**
   * Collapse notifications of the same key within this window; without one, each event gets
   * its own key `event:<eventId>`, so a redelivery of that event inserts nothing new.
   */
  dedupWindowMs?: number;
  title: (payload: never) => string;
}

export interface CatalogEntry {
  payload?: new () => object;
  /** Sent to the organization's webhook endpoints subscribed to it. */
  public: boolean;
  notification: NotificationRule;
}

export const EVENT_CATALOG = {
  'organization.created': {
    payload: OrganizationCreatedPayload,
    public: false,
    notification: {
      audience: 'none',
      mail: 'none',
      title: (p: OrganizationCreatedPayload) => `Organization ${p.name} created`,
    },
  },
  'member.invited': {
    payload: MemberInvitedPayload,
    public: true,
    notification: {
      audience: 'admins',
      mail: 'invitee',
      title: (p: MemberInvitedPayload) => `${p.email} was invited as ${p.role}`,
    },
  },
  'invoice.issued': {
    payload: InvoiceIssuedPayload,
    public: true,
    notification: {
      audience: 'admins',
      mail: 'none',
      title: (p: InvoiceIssuedPayload) => `Invoice ${p.number} issued`,
    },
  },
  'invoice.paid': {
    payload: InvoicePaidPayload,
    public: true,
    notification: {
      audience: 'members',
      mail: 'admins',
      title: (p: InvoicePaidPayload) => `Invoice ${p.number} was paid`,
    },
  },
  [OUTBOX_EVENT_DEAD]: {
    public: false,
    notification: {
      audience: 'admins',
      mail: 'none',
      title: (p: { type: string; eventId: string }) =>
        `Delivery of ${p.type} ${p.eventId} failed for good`,
    },
  },
} satisfies Record<string, CatalogEntry>;

export type EventType = keyof typeof EVENT_CATALOG;

export const EVENT_TYPES = Object.keys(EVENT_CATALOG) as EventType[];

/** Types webhook endpoints may subscribe to. */
export const PUBLIC_EVENT_TYPES = EVENT_TYPES.filter((type) => EVENT_CATALOG[type].public);

export function catalogEntry(type: string): CatalogEntry | undefined {
  return (EVENT_CATALOG as Record<string, CatalogEntry>)[type];
}
