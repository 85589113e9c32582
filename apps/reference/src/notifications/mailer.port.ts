/** One mail, addressed to one recipient. */
export interface MailMessage {
  /** The organization the mail is sent for: it, and only it, reads the mail in `GET /mails`. */
  organizationId: string;
  to: string;
  subject: string;
  text: string;
  /**
   * The same for every attempt at this mail (handler, event and recipient): an adapter sends a
   * key at most once, however often the handler that asks for it is run again.
   */
  idempotencyKey: string;
}

/** `sent`: handed over now; `duplicate`: this key was already sent, nothing was done. */
export type MailSendResult = 'sent' | 'duplicate';

/**
 * Where the app's mails go; an abstract class so it doubles as the injection token. The adapter
 * is chosen at boot: `SmtpMailer` when `SMTP_URL` is set, `RecordingMailer` otherwise.
 */
export abstract class MailerPort {
  abstract send(message: MailMessage): Promise<MailSendResult>;
}
