import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

/** One message as the server received it. */
export interface ReceivedMail {
  /** `MAIL FROM` of the envelope. */
  from: string | null;
  /** `RCPT TO` of the envelope. */
  to: string[];
  /** The user the client authenticated as, or null without AUTH. */
  user: string | null;
  /** The message as sent, headers and body. */
  raw: string;
  /** Header values by lowercased name (folded lines joined; the last one wins). */
  headers: Record<string, string>;
}

export interface TestSmtpServer {
  port: number;
  /** Every message accepted so far, in the order received. */
  readonly messages: readonly ReceivedMail[];
  /**
   * `smtp://[user:pass@]127.0.0.1:<port>?ignoreTLS=true`: the server offers STARTTLS with
   * smtp-server's built-in test certificate, which the client must not try to trust.
   */
  url(auth?: { user: string; pass: string }): string;
  close(): Promise<void>;
}

/**
 * A real SMTP server on 127.0.0.1 and a free port that accepts every message and records its
 * envelope and data. AUTH is optional; with `users`, a client that authenticates must present
 * one of those passwords (accepted over cleartext, as it is only a local test).
 */
export async function startSmtpServer(
  options: { users?: Record<string, string> } = {},
): Promise<TestSmtpServer> {
  const messages: ReceivedMail[] = [];
  const users = options.users ?? {};
  const server = new SMTPServer({
    authOptional: true,
    allowInsecureAuth: true,
    logger: false,
    closeTimeout: 2_000,
    onAuth(auth, _session, callback) {
      const expected = auth.username === undefined ? undefined : users[auth.username];
      if (expected !== undefined && auth.password === expected) {
        callback(null, { user: auth.username });
      } else {
        callback(new Error('Invalid username or password'));
      }
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', (error) => callback(error));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const { mailFrom, rcptTo } = session.envelope;
        messages.push({
          from: mailFrom ? mailFrom.address : null,
          to: rcptTo.map((r) => r.address),
          user: typeof session.user === 'string' ? session.user : null,
          raw,
          headers: parseHeaders(raw),
        });
        callback(null, 'queued');
      });
    },
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.server.address() as AddressInfo;

  return {
    port,
    messages,
    url(auth) {
      const credentials = auth
        ? `${encodeURIComponent(auth.user)}:${encodeURIComponent(auth.pass)}@`
        : '';
      return `smtp://${credentials}127.0.0.1:${port}?ignoreTLS=true`;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

function parseHeaders(raw: string): Record<string, string> {
  const end = raw.indexOf('\r\n\r\n');
  const block = (end === -1 ? raw : raw.slice(0, end)).replace(/\r\n[ \t]+/g, ' ');
  const headers: Record<string, string> = {};
  for (const line of block.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0)
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return headers;
}
