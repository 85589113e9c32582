import { onAbort } from '../../common/abort-subscribers.util';
import { abortError } from '../abortable';
import type { NatsConnection, NatsHeaders, NatsMessage } from './nats.client';

interface AwaitedAck {
  /** The subject the message went to, for the error that says no stream holds it. */
  subject: string;
  resolve(): void;
  reject(error: Error): void;
}

/** The header JetStream deduplicates a message by, within the stream's duplicate window. */
const MSG_ID_HEADER = 'Nats-Msg-Id';

/**
 * JetStream publishes whose acks are gathered: every message goes out at once with a reply
 * subject of its own under one subscription, and the stream's ack, whenever it comes, settles
 * that message alone. The client's `js.publish` does the same round trip through a request per
 * message, which builds a timer, a deferred and an Error for each: at thousands of messages a
 * second, most of a relay's CPU. One publisher per connection; the client resubscribes its
 * reply subject after a reconnect, and an ack lost in the cut ends in the message's timeout.
 */
export class JetStreamPublisher {
  private readonly awaited = new Map<string, AwaitedAck>();
  private readonly prefix: string;
  private count = 0;
  /** Why the reply subscription ended (a permissions violation, the client closing), if it did. */
  private ended: Error | undefined;

  constructor(
    private readonly connection: NatsConnection,
    inbox: string,
    private readonly timeoutMs: number,
  ) {
    this.prefix = `${inbox}.`;
    connection.subscribe(`${inbox}.*`, {
      callback: (error, message) => {
        if (error) this.end(error);
        else this.onAck(message);
      },
    });
  }

  /** False once the reply subscription has ended: acks can no longer arrive; make another. */
  get usable(): boolean {
    return this.ended === undefined;
  }

  /**
   * Sends `data` to `subject` with `headers` and `Nats-Msg-Id` = `msgId`, and calls `sent` once
   * it is handed to the client; resolves on the stream's ack (a duplicate counts), rejects on
   * its error, after `timeoutMs` without one, or when `signal` aborts.
   */
  publish(
    subject: string,
    data: Uint8Array,
    msgId: string,
    headers: NatsHeaders,
    signal: AbortSignal,
    sent?: () => void,
  ): Promise<void> {
    signal.throwIfAborted();
    if (this.ended) return Promise.reject(this.ended);
    const reply = `${this.prefix}${(this.count++).toString(36)}`;
    return new Promise<void>((resolve, reject) => {
      const done = (): void => {
        this.awaited.delete(reply);
        clearTimeout(timer);
        stopAbort();
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`JetStream did not ack the message within ${this.timeoutMs} ms`));
      }, this.timeoutMs);
      const stopAbort = onAbort(signal, () => {
        done();
        reject(abortError(signal));
      });
      this.awaited.set(reply, {
        subject,
        resolve: () => {
          done();
          resolve();
        },
        reject: (error) => {
          done();
          reject(error);
        },
      });
      headers.set(MSG_ID_HEADER, msgId);
      try {
        this.connection.publish(subject, data, { reply, headers });
      } catch (error) {
        done();
        reject(error instanceof Error ? error : new Error(String(error)));
        return;
      }
      sent?.();
    });
  }

  /** The reply subscription ended: every ack still awaited fails now rather than at its timeout. */
  private end(error: Error): void {
    this.ended = new Error(`the JetStream ack subscription ended: ${error.message}`, {
      cause: error,
    });
    for (const waiting of [...this.awaited.values()]) waiting.reject(this.ended);
  }

  private onAck(message: NatsMessage): void {
    const waiting = this.awaited.get(message.subject);
    if (!waiting) return;
    const problem = ackProblem(message, waiting.subject);
    if (problem) waiting.reject(problem);
    else waiting.resolve();
  }
}

/**
 * Why an answer is not an ack, or undefined when it is one (`{ stream, seq, duplicate? }`). A
 * 503 status with no body means nothing listens on the subject: no stream holds it.
 */
function ackProblem(message: NatsMessage, subject: string): Error | undefined {
  if (message.data.length === 0 && message.headers?.code === 503) {
    return new Error(`no JetStream stream holds the subject "${subject}" (no responders)`);
  }
  let answer: { stream?: unknown; error?: { code?: unknown; description?: unknown } };
  try {
    answer = JSON.parse(Buffer.from(message.data).toString('utf8')) as typeof answer;
  } catch {
    return new Error('JetStream answered the publish with something other than JSON');
  }
  if (answer.error) {
    const { code, description } = answer.error;
    return new Error(`JetStream refused the message: ${String(description)} (${String(code)})`);
  }
  if (typeof answer.stream !== 'string' || answer.stream === '') {
    return new Error('JetStream answered the publish without a stream (invalid ack)');
  }
  return undefined;
}
