import {
  createServer,
  type IncomingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One request as the receiver saw it, and what it answered. */
export interface ReceivedWebhook {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The raw body, exactly as signed. */
  rawBody: string;
  /** The body verified and parsed by standardwebhooks; undefined when verification failed. */
  body: unknown;
  verified: boolean;
  verifyError?: string;
  /** The status it answered, or `'hung'` when it held the request without answering. */
  response: number | 'hung';
}

/**
 * A real HTTP server on 127.0.0.1 that records every request, verifies each one's Standard
 * Webhooks signature with the secret registered for its path, and answers 204 when it
 * verifies, 401 when not. It can be told to fail the next N requests with 500, or to hold them
 * without answering (so the sender's timeout fires).
 */
export class WebhookReceiver {
  readonly requests: ReceivedWebhook[] = [];
  private readonly secrets = new Map<string, string>();
  private failures = 0;
  private hangs = 0;
  private failureBody = 'receiver told to fail';
  private readonly held = new Set<ServerResponse>();

  private readonly server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => this.handle(req.method ?? '', req.url ?? '', req.headers, chunks, res));
  });
  /** `http://127.0.0.1:<port>`, once started. */
  origin = '';

  private constructor() {}

  static async start(): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver();
    await new Promise<void>((resolve, reject) => {
      receiver.server.once('error', reject);
      receiver.server.listen(0, '127.0.0.1', () => resolve());
    });
    const { port } = receiver.server.address() as AddressInfo;
    receiver.origin = `http://127.0.0.1:${port}`;
    return receiver;
  }

  /** The URL of `path` on this receiver. */
  url(path: string): string {
    return `${this.origin}${path}`;
  }

  /** Requests to `path` are verified with `secret` from now on. */
  trust(path: string, secret: string): void {
    this.secrets.set(path, secret);
  }

  /** The next `n` requests (any path) are answered 500 with `body`. */
  failNext(n: number, body = 'receiver told to fail'): void {
    this.failures = n;
    this.failureBody = body;
  }

  /** The next `n` requests (any path) are held without an answer until the sender gives up. */
  hangNext(n: number): void {
    this.hangs = n;
  }

  requestsTo(path: string): ReceivedWebhook[] {
    return this.requests.filter((r) => r.path === path);
  }

  async close(): Promise<void> {
    for (const res of this.held) res.destroy();
    this.held.clear();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(
    method: string,
    url: string,
    headers: IncomingHttpHeaders,
    chunks: Buffer[],
    res: ServerResponse,
  ): void {
    const path = url.split('?')[0];
    const rawBody = Buffer.concat(chunks).toString('utf8');
    const record: ReceivedWebhook = {
      method,
      path,
      headers,
      rawBody,
      body: undefined,
      verified: false,
      response: 204,
    };
    const secret = this.secrets.get(path);
    if (secret === undefined) {
      record.verifyError = `no secret registered for ${path}`;
    } else {
      try {
        record.body = new Webhook(secret).verify(rawBody, {
          'webhook-id': String(headers['webhook-id'] ?? ''),
          'webhook-timestamp': String(headers['webhook-timestamp'] ?? ''),
          'webhook-signature': String(headers['webhook-signature'] ?? ''),
        });
        record.verified = true;
      } catch (err) {
        record.verifyError = String(err);
      }
    }
    this.requests.push(record);

    if (this.hangs > 0) {
      this.hangs -= 1;
      record.response = 'hung';
      this.held.add(res);
      res.on('close', () => this.held.delete(res));
      return;
    }
    if (this.failures > 0) {
      this.failures -= 1;
      record.response = 500;
      res.writeHead(500, { 'content-type': 'text/plain' }).end(this.failureBody);
      return;
    }
    record.response = record.verified ? 204 : 401;
    res.writeHead(record.response).end();
  }
}
