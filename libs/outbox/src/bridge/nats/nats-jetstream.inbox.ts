import { Logger } from '@nestjs/common';
import { delay } from '../../common/delay.util';
import { scrubError } from '../../common/scrub-error.util';
import type { InboxDelivery, OutboxInboxTransport } from '../bridge.types';
import { TransportOptionsCheck, type BrokerConnectionOptions } from '../transport-options';
import {
  loadNats,
  natsLink,
  serverLabel,
  type JsMessage,
  type NatsConnection,
} from './nats.client';

export interface NatsJetStreamInboxOptions extends BrokerConnectionOptions {
  servers: string | readonly string[];
  /** The stream the messages are in. */
  stream: string;
  /**
   * The durable pull consumer the inbox reads through; created when absent (explicit acks,
   * `filterSubject`, `ackWaitMs`), used as it is otherwise.
   */
  consumer: string;
  /** Only for a consumer the inbox creates: the subjects it takes (every subject when absent). */
  filterSubject?: string;
  /** Only for a consumer the inbox creates: how long a message may go unacked; 30 s by default. */
  ackWaitMs?: number;
  /**
   * Messages taken from the stream and not yet acked, at most; 500 by default. A batch stored in
   * one transaction takes at most half of them, so the other half arrives meanwhile. A consumer
   * the inbox creates gets it as its `max_ack_pending`; give an existing consumer the same bound.
   * What the inbox may hold in memory is `prefetch` × the largest message (for an existing
   * consumer, its `max_ack_pending` × the largest message).
   */
  prefetch?: number;
  /**
   * JetStream has no dead-letter queue of its own. With a subject here (held by a stream), a
   * rejected message is published there with `outbox-reject-reason` before it is terminated;
   * without one it is terminated and only the log keeps its reason, so set one.
   */
  deadLetterSubject?: string;
  connection?: Record<string, unknown>;
}

const REJECT_REASON_HEADER = 'outbox-reject-reason';

/** How often the messages waiting behind a batch in hand are marked in progress. */
const KEEP_ALIVE_MS = 5000;

/** Reads a durable JetStream consumer for an inbox, in batches, acking each stored message. */
export function natsJetStreamInbox(options: NatsJetStreamInboxOptions): OutboxInboxTransport {
  const check = new TransportOptionsCheck('transport', options);
  check
    .text('servers', { list: true })
    .text('stream')
    .text('consumer')
    .text('filterSubject', { optional: true })
    .text('deadLetterSubject', { optional: true })
    .integer('ackWaitMs')
    .integer('prefetch')
    .object('connection');
  const linkOptions = check.connection();
  check.done();
  return new NatsInbox(options, linkOptions);
}

class NatsInbox implements OutboxInboxTransport {
  readonly kind = 'nats-jetstream';
  private readonly logger = new Logger('OutboxBridge');
  private readonly nats = loadNats();
  private readonly label: string;
  private readonly link;
  private readonly prefetch: number;
  /**
   * Arrived, not yet handed over: each message with its delivery, made as it arrives (reading its
   * headers is most of the client's cost per message), while the batch before it is being stored.
   */
  private readonly pending: { message: JsMessage; delivery: InboxDelivery }[] = [];
  private receive: ((batch: InboxDelivery[]) => Promise<void>) | undefined;
  private consuming:
    { client: NatsConnection; messages: { close(): Promise<void | Error> } } | undefined;
  private stopping = false;
  private watcher: Promise<void> | undefined;
  private pumping: Promise<void> | undefined;
  private nudge: (() => void) | undefined;

  constructor(
    private readonly options: NatsJetStreamInboxOptions,
    linkOptions: ReturnType<TransportOptionsCheck['connection']>,
  ) {
    this.label = `NATS inbox "${options.stream}/${options.consumer}" (${serverLabel(options.servers)})`;
    this.link = natsLink(
      this.nats,
      this.label,
      options.servers,
      options.connection ?? {},
      linkOptions,
    );
    this.prefetch = options.prefetch ?? 500;
  }

  connect(): Promise<void> {
    return this.link.connect();
  }

  status() {
    return this.link.status();
  }

  consume(receive: (batch: InboxDelivery[]) => Promise<void>): void {
    this.receive = receive;
    this.watcher ??= this.watch();
  }

  /** Within one deadline: the batch in hand, the consumer, then the connection. */
  async close(timeoutMs: number): Promise<void> {
    this.stopping = true;
    this.nudge?.();
    const deadline = Date.now() + timeoutMs;
    const left = () => Math.max(1, deadline - Date.now());
    const bound = delay(left());
    await Promise.race([Promise.all([this.watcher, this.pumping]), bound.promise]);
    bound.cancel();
    const consumerClosed = delay(left());
    await Promise.race([
      this.consuming?.messages.close().catch(() => undefined),
      consumerClosed.promise,
    ]);
    consumerClosed.cancel();
    await this.link.close(left());
  }

  /**
   * Consumes on whichever client the link holds: the client reconnects by itself and its pull
   * consumer goes on, but a client the link replaced needs its consumer started again.
   */
  private async watch(): Promise<void> {
    for (let failures = 0; !this.stopping;) {
      const client = this.link.current();
      if (client && client !== this.consuming?.client) {
        try {
          await this.startConsuming(client);
          failures = 0;
        } catch (error) {
          failures++;
          this.logger.warn(`${this.label}: cannot consume: ${scrubError(error)}`);
        }
      }
      const wait = delay(Math.min(250 * 2 ** failures, 10_000));
      await Promise.race([wait.promise, new Promise<void>((r) => (this.nudge = r))]);
      wait.cancel();
    }
  }

  private async startConsuming(client: NatsConnection): Promise<void> {
    await this.consuming?.messages.close().catch(() => undefined);
    this.consuming = undefined;
    const { stream, consumer } = this.options;
    const manager = await this.nats.jetstream.jetstreamManager(client);
    await manager.consumers.info(stream, consumer).catch(async (error: unknown) => {
      if ((error as { name?: string }).name !== 'ConsumerNotFoundError') throw error;
      await manager.consumers.add(stream, {
        durable_name: consumer,
        ack_policy: this.nats.jetstream.AckPolicy.Explicit,
        ack_wait: this.nats.core.nanos(this.options.ackWaitMs ?? 30_000),
        // The client pulls again before acks come back: the server's bound keeps what this
        // inbox holds unacked to `prefetch`.
        max_ack_pending: this.prefetch,
        filter_subject: this.options.filterSubject,
      });
    });
    const reader = await this.nats.jetstream.jetstream(client).consumers.get(stream, consumer);
    const messages = await reader.consume({
      max_messages: this.prefetch,
      callback: (message) => {
        this.pending.push({ message, delivery: this.delivery(message) });
        this.pumping ??= this.pump().catch((error: unknown) => {
          this.logger.warn(`${this.label}: receiving stopped: ${scrubError(error)}`);
        });
      },
    });
    this.consuming = { client, messages };
  }

  /**
   * Hands over what arrived, one batch at a time, in arrival order. While a batch is in hand
   * (the inbox may hold it through a database outage), the messages waiting behind it are kept
   * in progress, so the server does not hand them over a second time meanwhile.
   */
  private async pump(): Promise<void> {
    const keepAlive = setInterval(
      () => this.pending.forEach((p) => quietly('working')(p.message)),
      KEEP_ALIVE_MS,
    );
    try {
      while (this.pending.length > 0 && !this.stopping && this.receive) {
        // Half the prefetch: the server sends the other half while this half is stored.
        const batch = this.pending.splice(0, Math.ceil(this.prefetch / 2));
        await this.receive(batch.map((p) => p.delivery));
      }
    } finally {
      clearInterval(keepAlive);
      this.pumping = undefined;
    }
    if (this.pending.length > 0 && !this.stopping) {
      this.pumping = this.pump().catch((error: unknown) => {
        this.logger.warn(`${this.label}: receiving stopped: ${scrubError(error)}`);
      });
    }
  }

  private delivery(m: JsMessage): InboxDelivery {
    const headers: Record<string, string> = {};
    for (const key of m.headers?.keys() ?? []) headers[key.toLowerCase()] = m.headers!.get(key);
    return {
      message: {
        id: m.headers?.get('Nats-Msg-Id') || null,
        headers,
        body: Buffer.from(m.data),
        source: m.subject,
        deliveryCount: m.info.deliveryCount,
      },
      // A plain ack, not one the server confirms: waiting a round trip for that confirm held
      // the next batch back, and an ack that is lost only means the message comes again, which
      // its id makes a duplicate the outbox drops (as a confirm that never came would).
      ack: () => Promise.resolve(quietly('ack')(m)),
      // These throw at once on a connection that closed; the server hands the message over
      // again after its ack wait anyway.
      retryLater: (delayMs) => Promise.resolve(quietly('nak', delayMs)(m)),
      working: () => quietly('working')(m),
      reject: async (reason) => this.reject(m, reason),
    };
  }

  private async reject(m: JsMessage, reason: string): Promise<void> {
    const subject = this.options.deadLetterSubject;
    if (subject) {
      const copy = this.nats.core.headers();
      // Without Nats-Msg-Id: the stream's duplicate window must not drop the dead letter.
      for (const key of m.headers?.keys() ?? []) {
        if (key.toLowerCase() !== 'nats-msg-id') copy.set(key, m.headers!.get(key));
      }
      copy.set(REJECT_REASON_HEADER, reason.replace(/[\r\n]+/g, ' '));
      const client = this.link.require();
      const js = this.nats.jetstream.jetstream(client);
      await js.publish(subject, m.data, { headers: copy, timeout: 5000 });
    } else {
      this.logger.warn(`${this.label}: terminated message ${m.seq}: ${reason}`);
    }
    quietly('term', reason)(m);
  }
}

/** One of a message's calls that need a live connection, with its failure ignored. */
function quietly<K extends 'ack' | 'nak' | 'working' | 'term'>(
  call: K,
  ...args: Parameters<JsMessage[K]>
): (m: JsMessage) => void {
  return (m) => {
    try {
      (m[call] as (...a: unknown[]) => void)(...args);
    } catch {
      // The connection closed: the server redelivers after its ack wait.
    }
  };
}
