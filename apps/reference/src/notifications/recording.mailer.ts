import type { DataSource } from 'typeorm';
import { MailerPort, type MailMessage, type MailSendResult } from './mailer.port';

/**
 * The mailer without an SMTP server: each mail becomes a `mail_log` row (transport `recorded`),
 * keyed by its idempotency key, so a repeated key records nothing.
 */
export class RecordingMailer extends MailerPort {
  constructor(private readonly dataSource: DataSource) {
    super();
  }

  async send(message: MailMessage): Promise<MailSendResult> {
    const rows: unknown[] = await this.dataSource.query(
      `INSERT INTO mail_log
         (idempotency_key, organization_id, recipient, subject, body, transport, sent_at)
       VALUES ($1, $5, $2, $3, $4, 'recorded', now())
       ON CONFLICT (idempotency_key) DO NOTHING
       RETURNING idempotency_key`,
      [message.idempotencyKey, message.to, message.subject, message.text, message.organizationId],
    );
    return rows.length > 0 ? 'sent' : 'duplicate';
  }
}
