import type { ChannelModel } from 'amqplib';
import type { OutboxEvent } from '../../outbox-event.types';
import type { OutboxRelayMessage, OutboxRelayTransport } from '../bridge.types';
import { BrokerLink } from '../broker-link';
import { RELAY_CONTENT_TYPE } from '../relay-message';
import { TransportOptionsCheck, type BrokerConnectionOptions } from '../transport-options';
import {
  ConfirmPublisher,
  finishCheck,
  loadAmqp,
  openConnection,
  serverLabel,
  stringProblem,
  urlProblem,
  watch,
} from './rabbitmq.client';

export interface RabbitMqRelayOptions extends BrokerConnectionOptions {
  /** `amqp(s)://user:pass@host:port/vhost`; never logged (it may hold a password). */
  url: string;
  /** The exchange events are published to; '' is the default exchange (routing key = queue). */
  exchange: string;
  /** The routing key of an event; its type by default. */
  routingKey?: (event: OutboxEvent) => string;
  /** Bound on the wait for the publisher confirm; 5000 ms by default. */
  publishTimeoutMs?: number;
}

interface RelayClient {
  connection: ChannelModel;
  publisher: ConfirmPublisher;
}

/**
 * Relays events to a RabbitMQ exchange. An event is delivered when the broker confirms it
 * (publisher confirms) and some queue took it: messages are published `mandatory`, so one that
 * no binding routes comes back and fails the delivery instead of vanishing. Messages are
 * persistent and carry `message_id` = the event id, for the receiver's deduplication of a
 * republish after a crash between the confirm and the settle.
 */
export function rabbitMq(options: RabbitMqRelayOptions): OutboxRelayTransport {
  const check = new TransportOptionsCheck('transport', options);
  check.fn('routingKey').integer('publishTimeoutMs');
  const linkOptions = check.connection();
  finishCheck(check, [
    ...urlProblem(options.url),
    ...stringProblem('transport.exchange', options.exchange),
  ]);
  const amqp = loadAmqp();
  const { url, exchange } = options;
  const server = serverLabel(url);
  const label = `RabbitMQ relay "${exchange}" (${server})`;
  const routingKeyOf = options.routingKey ?? ((event: OutboxEvent) => event.type);
  const timeoutMs = options.publishTimeoutMs ?? 5000;
  let closing = false;

  const link = new BrokerLink<RelayClient>('rabbitmq', label, linkOptions, {
    open: async (events) => {
      let live = false;
      const { client } = await openConnection(
        amqp,
        url,
        `outbox relay to "${exchange}"`,
        linkOptions.connectTimeoutMs,
        async (connection) => {
          const channel = await connection.createConfirmChannel();
          watch(events, [connection, channel], () => closing || !live);
          return { connection, publisher: new ConfirmPublisher(channel) };
        },
      );
      live = true;
      return client;
    },
    close: (client) => client.connection.close(),
  });

  return {
    kind: 'rabbitmq',
    connect: () => link.connect(),
    status: () => link.status(),
    close: async (closeTimeoutMs) => {
      closing = true;
      await link.close(closeTimeoutMs);
    },
    async publish(
      { event, headers, body }: OutboxRelayMessage,
      signal: AbortSignal,
      sent?: () => void,
    ) {
      signal.throwIfAborted();
      const { publisher } = link.require();
      await publisher.publish(
        exchange,
        routingKeyOf(event),
        body,
        {
          persistent: true,
          mandatory: true,
          messageId: event.id,
          contentType: RELAY_CONTENT_TYPE,
          type: event.type,
          timestamp: Math.floor(event.occurredAt.getTime() / 1000),
          headers,
        },
        signal,
        timeoutMs,
        sent,
      );
    },
  };
}
