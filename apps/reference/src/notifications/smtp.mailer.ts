import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { createTransport, type Transporter } from 'nodemailer';
import { parseConnectionUrl } from 'nodemailer/lib/shared';
import type { DataSource } from 'typeorm';
import { MailerPort, type MailMessage, type MailSendResult } from './mailer.port';

export interface SmtpMailerOptions {
  /** `smtp://` (STARTTLS when offered) or `smtps://` (TLS from the start); may carry credentials. */
  url: string;
  /** The `From` of every mail, e.g. `Outbox Demo <noreply@example.test>`. */
  from: string;
}

/** Bounds on one SMTP conversation, well inside the outbox handler budget. */
const TIMEOUTS = { connectionTimeout: 5_000, greetingTimeout: 5_000, socketTimeout: 8_000 };
/**
 * How long a send holds its key: longer than the timeouts above add up to, so a key is taken
 * over only from a send that must have ended.
 */
const CLAIM_WINDOW_MS = 60_000;

/**
 * The `Message-ID` of the mail with this idempotency key: the same on every send of the key,
 * so a mail sent again after a crash between the send and its bookkeeping is recognisable as
 * the same message (`<sha256(key)@domain of MAIL_FROM>`).
 */
export function smtpMessageId(idempotencyKey: string, from: string): string {
  const domain = /@([A-Za-z0-9.-]+)>?\s*$/.exec(from)?.[1] ?? 'localhost';
  return `<${createHash('sha256').update(idempotencyKey).digest('hex')}@${domain}>`;
}

/**
 * Sends through nodemailer to `SMTP_URL`. Each key is logged in `mail_log` (transport `smtp`)
 * before the send and marked `sent_at` after it; a key already marked is skipped. Options in
 * the URL's query reach nodemailer (`?ignoreTLS=true`, `?requireTLS=true`, `?tls.servername=`);
 * credentials are used, never logged.
 */
export class SmtpMailer extends MailerPort implements OnApplicationShutdown {
  private readonly logger = new Logger(SmtpMailer.name);
  private readonly transport: Transporter;

  constructor(
    private readonly dataSource: DataSource,
    private readonly options: SmtpMailerOptions,
  ) {
    super();
    const connection = parseConnectionUrl(options.url);
    this.transport = createTransport({ ...TIMEOUTS, ...connection, logger: false, debug: false });
    // Host and port only: the URL's user and password stay out of every log line.
    this.logger.log(
      `Mails go out through SMTP at ${String(connection.host)}:${String(connection.port ?? 'default port')}`,
    );
  }

  async send(message: MailMessage): Promise<MailSendResult> {
    const claimed: unknown[] = await this.dataSource.query(
      `INSERT INTO mail_log (idempotency_key, organization_id, recipient, subject, body, transport)
       VALUES ($1, $6, $2, $3, $4, 'smtp')
       ON CONFLICT (idempotency_key) DO UPDATE
         SET organization_id = EXCLUDED.organization_id, recipient = EXCLUDED.recipient, subject = EXCLUDED.subject, body = EXCLUDED.body,
             transport = EXCLUDED.transport, claimed_at = now()
         WHERE mail_log.sent_at IS NULL
           AND mail_log.claimed_at < now() - make_interval(secs => $5 / 1000.0)
       RETURNING idempotency_key`,
      [
        message.idempotencyKey,
        message.to,
        message.subject,
        message.text,
        CLAIM_WINDOW_MS,
        message.organizationId,
      ],
    );
    if (claimed.length === 0) {
      // Either sent already, or another attempt (one whose handler ran out of time, say) is
      // still sending it: that one must finish or time out before this key is taken over.
      const [row] = await this.dataSource.query<{ sent: boolean }[]>(
        `SELECT sent_at IS NOT NULL AS sent FROM mail_log WHERE idempotency_key = $1`,
        [message.idempotencyKey],
      );
      if (row?.sent) return 'duplicate';
      throw new Error(
        `mail ${message.idempotencyKey} is being sent by another attempt; retry later`,
      );
    }

    await this.transport.sendMail({
      from: this.options.from,
      to: message.to,
      subject: message.subject,
      text: message.text,
      messageId: smtpMessageId(message.idempotencyKey, this.options.from),
    });
    await this.dataSource.query(
      `UPDATE mail_log SET sent_at = now() WHERE idempotency_key = $1 AND sent_at IS NULL`,
      [message.idempotencyKey],
    );
    return 'sent';
  }

  /** After the outbox engine has waited for running handlers (its `beforeApplicationShutdown`). */
  onApplicationShutdown(): void {
    this.transport.close();
  }
}
