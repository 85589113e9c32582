import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';

/** How much of a failing response's body is read, in bytes; the rest is never received. */
export const ERROR_BODY_BYTES = 300;

export interface WebhookPost {
  url: URL;
  headers: Record<string, string>;
  body: string;
  /** Ends the request, response included, when it aborts. */
  signal: AbortSignal;
  /** Resolves the URL's host name; it may refuse the address it finds. */
  lookup: LookupFunction;
}

/** The endpoint's answer: its status and, for a non-2xx, the first bytes of its body. */
export interface WebhookAnswer {
  status: number;
  excerpt: string;
}

/**
 * POSTs once, on a connection of its own (no pool: each connection is dialled through `lookup`),
 * following no redirect. A 2xx body is not read at all; of any other body, at most
 * ERROR_BODY_BYTES are, and then the response is destroyed, so an endpoint that answers with an
 * endless body costs a few kilobytes and no time.
 */
export function postWebhook(post: WebhookPost): Promise<WebhookAnswer> {
  const request = post.url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const outgoing = request(
      post.url,
      {
        method: 'POST',
        headers: { ...post.headers, 'content-length': String(Buffer.byteLength(post.body)) },
        signal: post.signal,
        lookup: post.lookup,
        agent: false,
      },
      (response) => {
        const status = response.statusCode ?? 0;
        if (status >= 200 && status < 300) {
          response.destroy();
          resolve({ status, excerpt: '' });
          return;
        }
        void readExcerpt(response).then((excerpt) => resolve({ status, excerpt }));
      },
    );
    outgoing.once('error', reject);
    outgoing.end(post.body);
  });
}

/** The first ERROR_BODY_BYTES of the body (as UTF-8, a cut character replaced), then no more. */
function readExcerpt(response: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = () => {
      response.off('data', onData);
      response.destroy();
      const bytes = Buffer.concat(chunks).subarray(0, ERROR_BODY_BYTES);
      resolve(new TextDecoder().decode(bytes));
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= ERROR_BODY_BYTES) finish();
    };
    response.on('data', onData);
    response.once('end', finish);
    response.once('close', finish);
    response.once('error', finish);
  });
}
