import type { OutboxEvent } from '../../outbox-event.types';
import type { OutboxRelayMessage, OutboxRelayTransport } from '../bridge.types';
import { JetStreamPublisher } from './jetstream-publisher';
import { TransportOptionsCheck, type BrokerConnectionOptions } from '../transport-options';
import { loadNats, natsLink, serverLabel, type NatsConnection } from './nats.client';

export interface NatsJetStreamRelayOptions extends BrokerConnectionOptions {
  /** `nats://host:4222`, or several for a cluster. */
  servers: string | readonly string[];
  /**
   * The subject an event is published on; `outbox.<type>` by default. A stream must capture it:
   * a subject no stream holds fails the delivery (JetStream answers "no responders").
   */
  subject?: (event: OutboxEvent) => string;
  /** Bound on the wait for the stream's publish ack; 5000 ms by default. */
  publishTimeoutMs?: number;
  /** Passed to the client's `connect` as they are: `user`, `pass`, `token`, `tls`, `name`. */
  connection?: Record<string, unknown>;
}

/**
 * Relays events to a JetStream stream. An event is delivered when the stream acks it. Each
 * message carries `Nats-Msg-Id` = the event id, so a republish after a crash between the ack and
 * the settle is dropped by the stream's duplicate window (2 minutes unless the stream says
 * otherwise) and reported as a duplicate ack, which counts as delivered.
 */
export function natsJetStream(options: NatsJetStreamRelayOptions): OutboxRelayTransport {
  const check = new TransportOptionsCheck('transport', options);
  check
    .text('servers', { list: true })
    .fn('subject')
    .integer('publishTimeoutMs')
    .object('connection');
  const link = check.connection();
  check.done();
  const nats = loadNats();
  const label = `NATS relay (${serverLabel(options.servers)})`;
  const connection = natsLink(nats, label, options.servers, options.connection ?? {}, link);
  const subjectOf = options.subject ?? ((event: OutboxEvent) => `outbox.${event.type}`);
  const timeout = options.publishTimeoutMs ?? 5000;
  // Acks come back on a subject under the client's inbox prefix, which a deployment that limits
  // subscribe permissions sets.
  const inboxPrefix = options.connection?.inboxPrefix as string | undefined;
  // One publisher per client: the link replaces the client after it closes for good.
  const publishers = new WeakMap<NatsConnection, JetStreamPublisher>();

  return {
    kind: 'nats-jetstream',
    connect: () => connection.connect(),
    status: () => connection.status(),
    close: (timeoutMs) => connection.close(timeoutMs),
    async publish(
      { event, headers, body }: OutboxRelayMessage,
      signal: AbortSignal,
      sent?: () => void,
    ) {
      const client = connection.require();
      let publisher = publishers.get(client);
      if (!publisher?.usable) {
        publisher = new JetStreamPublisher(client, nats.core.createInbox(inboxPrefix), timeout);
        publishers.set(client, publisher);
      }
      const natsHeaders = nats.core.headers();
      for (const name in headers) natsHeaders.set(name, headers[name]);
      await publisher.publish(subjectOf(event), body, event.id, natsHeaders, signal, sent);
    },
  };
}
