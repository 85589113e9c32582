import type { ChannelModel, ConfirmChannel, Message, Options } from 'amqplib';
import { onAbort } from '../../common/abort-subscribers.util';
import { loadOptionalPackage } from '../../common/optional-package.util';
import { scrubError } from '../../common/scrub-error.util';
import { InvalidOutboxOptionsError } from '../../outbox.errors';
import { RabbitMqPublishError } from './rabbitmq-publish.error';
import type { LinkEvents } from '../broker-link';
import type { TransportOptionsCheck } from '../transport-options';

export type Amqp = typeof import('amqplib');

/** amqplib, loaded only when a RabbitMQ transport is created: it is an optional peer dependency. */
export function loadAmqp(): Amqp {
  const amqp = loadOptionalPackage<Amqp>('amqplib');
  if (!amqp) {
    throw new Error(
      'RabbitMQ transports need the optional package "amqplib", which is not installed: ' +
        'npm install amqplib',
    );
  }
  return amqp;
}

type Problem = { path: string; value: unknown; messages: string[] };

/**
 * Checks what `TransportOptionsCheck` has no rule for (a URL, a string that may be empty), then
 * throws every problem at once, the check's and these, so the boot names them all.
 */
export function finishCheck(check: TransportOptionsCheck, extra: Problem[]): void {
  try {
    check.done();
  } catch (error) {
    if (error instanceof InvalidOutboxOptionsError && extra.length > 0) {
      throw new InvalidOutboxOptionsError([...error.problems, ...extra]);
    }
    throw error;
  }
  if (extra.length > 0) throw new InvalidOutboxOptionsError(extra);
}

/** A problem with `transport.url`, or none; the value shown is scrubbed (it may hold a password). */
export function urlProblem(url: unknown): Problem[] {
  const problem = (message: string): Problem[] => [
    {
      path: 'transport.url',
      value: typeof url === 'string' ? scrubError(url) : url,
      messages: [message],
    },
  ];
  if (typeof url !== 'string' || url.trim() === '') return problem('must be a non-empty string');
  const protocol = parseUrl(url)?.protocol;
  if (protocol !== 'amqp:' && protocol !== 'amqps:') {
    return problem('must be an amqp:// or amqps:// URL');
  }
  return [];
}

/** A string, possibly empty (the default exchange is ''), at `path`. */
export function stringProblem(path: string, value: unknown, optional = false): Problem[] {
  if (typeof value === 'string' || (optional && value === undefined)) return [];
  return [{ path, value, messages: ['must be a string (it may be empty)'] }];
}

function parseUrl(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}

/** `amqp://host:port`, without the credentials (and vhost) the URL may carry: safe to log. */
export function serverLabel(url: string): string {
  const parsed = parseUrl(url);
  if (!parsed) return 'amqp://?';
  const port = parsed.port || (parsed.protocol === 'amqps:' ? '5671' : '5672');
  return `${parsed.protocol}//${parsed.hostname}:${port}`;
}

/**
 * One connection attempt, bounded as a whole: amqplib's socket timeout covers the TCP connect
 * and the handshake, but not the channel and queue calls `setup` makes afterwards, and a broker
 * that accepts the socket and then stalls must not hold the link forever. A connection that is
 * set up too late, or whose setup fails, is closed rather than left open.
 */
export async function openConnection<C>(
  amqp: Amqp,
  url: string,
  name: string,
  timeoutMs: number,
  setup: (connection: ChannelModel, step: (what: string) => void) => Promise<C>,
): Promise<{ connection: ChannelModel; client: C }> {
  const began = Date.now();
  const connection = await amqp.connect(withHeartbeat(url), {
    timeout: timeoutMs,
    clientProperties: { connection_name: name },
  });
  // An 'error' without a listener would throw out of amqplib's socket handler and crash the
  // process; the real handling is attached by `watch` once set up.
  const swallow = (): void => undefined;
  connection.on('error', swallow);
  let timer: NodeJS.Timeout | undefined;
  // What the set-up is waiting for, so a stall names its step (an unavailable quorum queue
  // stalls the queue check, for one).
  let current = 'opening a channel';
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`RabbitMQ did not answer within ${timeoutMs} ms while ${current}`)),
      Math.max(0, timeoutMs - (Date.now() - began)),
    );
  });
  try {
    const client = await Promise.race([setup(connection, (what) => (current = what)), bound]);
    return { connection, client };
  } catch (error) {
    connection.close().catch(() => undefined);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The URL with a 5 s heartbeat unless it names its own: both sides then find a connection that
 * went silent (a black-holed network path) within about 10 s, where the broker's default of 60 s
 * would leave publishes failing for minutes before a reconnect.
 */
function withHeartbeat(url: string): string {
  const parsed = parseUrl(url);
  if (!parsed || parsed.searchParams.has('heartbeat')) return url;
  parsed.searchParams.set('heartbeat', '5');
  return parsed.toString();
}

/**
 * Reports the first 'error' or 'close' of the connection or of any of its channels to the link
 * as lost for good, so it reconnects; a channel closed by the broker (a missing exchange on
 * publish, a queue deleted under a consumer) is as dead to us as the connection, and a fresh
 * connection is the simplest way back. Listeners stay: every later 'error' must still be caught.
 * `ignore` is true while nothing must be reported: before the attempt has succeeded (a failed
 * set-up is the attempt's own error, and a report would cut the link's backoff short) and while
 * the transport closes. Returns the reporter, for losses amqplib does not emit.
 */
export function watch(
  events: LinkEvents,
  emitters: ReadonlyArray<NodeJS.EventEmitter>,
  ignore: () => boolean,
): (error: unknown) => void {
  let reported = false;
  let lastError: unknown;
  const report = (error: unknown): void => {
    lastError = error ?? lastError;
    if (reported || ignore()) return;
    reported = true;
    // 'error' comes before 'close'; wait a tick so the error, not a bare close, is reported.
    setImmediate(() => events.closed(lastError ?? new Error('connection closed')));
  };
  for (const emitter of emitters) {
    emitter.on('error', (error: unknown) => report(error));
    emitter.on('close', (error: unknown) => report(error));
  }
  return report;
}

/** Names the header that correlates a returned copy whose original had no message id. */
export const RETURN_KEY_HEADER = 'x-outbox-return-key';

type InFlight = { returned?: RabbitMqPublishError };

/**
 * Publishes on one confirm channel and waits for each message's confirm. Mandatory publishes an
 * exchange cannot route come back as 'return' before their ack; the return is matched to its
 * publish by message id (or `RETURN_KEY_HEADER`), and turns that ack into a failure. When the
 * channel's buffer is full, publishes wait for 'drain' before writing.
 */
export class ConfirmPublisher {
  private readonly inFlight = new Map<string, InFlight[]>();
  private blocked: { promise: Promise<void>; release(): void } | undefined;
  /** Why the broker closed the channel: amqplib fails the outstanding confirms without it. */
  private closedBecause: string | undefined;

  constructor(readonly channel: ConfirmChannel) {
    channel.on('error', (error: unknown) => (this.closedBecause ??= scrubError(error)));
    channel.on('return', (message: Message) => this.onReturn(message));
    channel.on('drain', () => this.unblock());
    channel.on('close', () => this.unblock());
  }

  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    properties: Options.Publish,
    signal: AbortSignal | undefined,
    timeoutMs: number,
    sent?: () => void,
  ): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(
          (signal.reason as Error | undefined) ?? new RabbitMqPublishError('aborted', 'aborted'),
        );
        return;
      }
      const key = returnKey(properties);
      const entry: InFlight = {};
      let settled = false;
      const finish = (error?: Error): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        stopAbort();
        this.untrack(key, entry);
        if (error) reject(error);
        else resolve();
      };
      const timer = setTimeout(
        () =>
          finish(
            new RabbitMqPublishError('timeout', `RabbitMQ did not confirm within ${timeoutMs} ms`),
          ),
        timeoutMs,
      );
      const stopAbort = onAbort(signal, () =>
        finish(
          (signal?.reason as Error | undefined) ??
            new RabbitMqPublishError('aborted', 'publish aborted'),
        ),
      );
      const send = (): void => {
        if (settled) return;
        if (this.blocked) {
          void this.blocked.promise.then(send);
          return;
        }
        this.track(key, entry);
        try {
          const written = this.channel.publish(exchange, routingKey, content, properties, (error) =>
            finish(error ? confirmError(error, this.closedBecause) : entry.returned),
          );
          if (!written) this.block();
        } catch (error) {
          // amqplib throws IllegalOperationError once the channel is closing or closed.
          finish(
            new RabbitMqPublishError('closed', `RabbitMQ channel unusable: ${scrubError(error)}`),
          );
          return;
        }
        // Taken by the channel (a blocked one waited above for its drain): only the confirm is left.
        sent?.();
      };
      send();
    });
  }

  private onReturn(message: Message): void {
    const key = returnKey(message.properties);
    const entry = key === undefined ? undefined : this.inFlight.get(key)?.find((e) => !e.returned);
    if (entry) entry.returned = returnedError(message);
  }

  private track(key: string | undefined, entry: InFlight): void {
    if (key === undefined) return;
    const list = this.inFlight.get(key);
    if (list) list.push(entry);
    else this.inFlight.set(key, [entry]);
  }

  private untrack(key: string | undefined, entry: InFlight): void {
    if (key === undefined) return;
    const list = this.inFlight.get(key);
    if (!list) return;
    const index = list.indexOf(entry);
    if (index !== -1) list.splice(index, 1);
    if (list.length === 0) this.inFlight.delete(key);
  }

  private block(): void {
    if (this.blocked) return;
    let release = (): void => undefined;
    const promise = new Promise<void>((resolve) => (release = resolve));
    this.blocked = { promise, release };
  }

  private unblock(): void {
    const blocked = this.blocked;
    this.blocked = undefined;
    blocked?.release();
  }
}

function returnKey(properties: { messageId?: unknown; headers?: unknown }): string | undefined {
  if (typeof properties.messageId === 'string') return properties.messageId;
  const header = (properties.headers as Record<string, unknown> | undefined)?.[RETURN_KEY_HEADER];
  return typeof header === 'string' ? header : undefined;
}

function returnedError({ fields }: Message): RabbitMqPublishError {
  const { exchange, routingKey, replyCode, replyText } = fields as unknown as {
    exchange: string;
    routingKey: string;
    replyCode: number;
    replyText: string;
  };
  const where = `exchange "${exchange}" for routing key "${routingKey}"`;
  const detail =
    replyCode === 312 ? `no queue is bound to ${where}` : `it could not be delivered from ${where}`;
  return new RabbitMqPublishError(
    'returned',
    `RabbitMQ returned the message: ${detail} (${replyCode} ${replyText})`,
  );
}

function confirmError(error: unknown, closedBecause: string | undefined): RabbitMqPublishError {
  const message = error instanceof Error ? error.message : String(error);
  // amqplib calls back with 'message nacked' on a nack and 'channel closed' when the channel
  // closes with the confirm outstanding.
  if (message === 'message nacked') {
    return new RabbitMqPublishError('nacked', 'RabbitMQ refused the message (publisher nack)');
  }
  return new RabbitMqPublishError(
    'closed',
    `RabbitMQ channel closed before the confirm: ${closedBecause ?? 'connection lost'}`,
  );
}
