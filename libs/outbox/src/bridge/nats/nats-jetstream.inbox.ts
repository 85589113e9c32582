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
  /** Messages taken from the stream and not yet acked, at most; 100 by default. */
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
  private readonly pending: JsMessage[] = [];
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
    this.prefetch = options.prefetch ?? 100;
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

  async close(timeoutMs: number): Promise<void> {
    this.stopping = true;
    this.nudge?.();
    const bound = delay(timeoutMs);
    await Promise.race([Promise.all([this.watcher, this.pumping]), bound.promise]);
    bound.cancel();
    await this.consuming?.messages.close().catch(() => undefined);
    await this.link.close(timeoutMs);
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
        filter_subject: this.options.filterSubject,
      });
    });
    const reader = await this.nats.jetstream.jetstream(client).consumers.get(stream, consumer);
    const messages = await reader.consume({
      max_messages: this.prefetch,
      callback: (message) => {
        this.pending.push(message);
        this.pumping ??= this.pump();
      },
    });
    this.consuming = { client, messages };
  }

  /** Hands over what arrived, one batch at a time, in arrival order. */
  private async pump(): Promise<void> {
    try {
      while (this.pending.length > 0 && !this.stopping && this.receive) {
        const batch = this.pending.splice(0, this.prefetch);
        await this.receive(batch.map((m) => this.delivery(m)));
      }
    } finally {
      this.pumping = undefined;
    }
    if (this.pending.length > 0 && !this.stopping) this.pumping = this.pump();
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
      ack: async () => {
        await m.ackAck({ timeout: 5000 });
      },
      retryLater: (delayMs) => Promise.resolve(m.nak(delayMs)),
      working: () => m.working(),
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
    m.term(reason);
  }
}
