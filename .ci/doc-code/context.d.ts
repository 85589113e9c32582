// What the documentation's blocks take from the reader's own app, declared once: the entities,
// payload types, guards and injected services its examples name without defining.
import type { CanActivate } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import type { OutboxAdmin, OutboxPublisher } from 'nestjs-lease-outbox';
import type { INestApplication } from '@nestjs/common';

declare global {
  class Invoice {
    id: string;
    status: string;
  }
  class AuditEntry {
    eventId: string;
    type: string;
  }
  interface InvoicePaid {
    amountCents: number;
  }
  interface Posting {
    accountId: string;
    amountCents: number;
  }
  class Mailer {
    sendReceipt(payload: InvoicePaid, options: { idempotencyKey: string }): Promise<void>;
  }
  class WebhookSender {
    send(payload: unknown, options: { idempotencyKey: string; signal: AbortSignal }): Promise<void>;
  }
  class AdminSessionGuard implements CanActivate {
    canActivate(): boolean;
  }
  const dataSource: DataSource;
  const outbox: OutboxPublisher;
  const admin: OutboxAdmin;
  const app: INestApplication;
  const id: string;
  const poisonId: string;
  const organizationId: string;
  const requestId: string;
  const payload: Record<string, unknown>;
}
