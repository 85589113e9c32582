import type { MessageProperties } from 'amqplib';

/** A message as a broker holds it, in terms both transports have. */
export interface BrokerMessage {
  /** The broker's own message id: JetStream's Nats-Msg-Id, AMQP's message-id. */
  id: string | undefined;
  /** The subject (NATS) or routing key (RabbitMQ) it was published with. */
  destination: string;
  /** Its headers, names in lower case, without those the broker itself owns (Nats-*). */
  headers: Record<string, unknown>;
  body: string;
  /** The body as JSON; `{ key: -1, n: -1, text }` when it is not JSON. */
  payload: { key: number; n: number } & Record<string, unknown>;
  /** AMQP's basic properties; none on NATS. */
  properties?: MessageProperties;
}

/** `body` as JSON, or a payload no test key matches that keeps the text. */
export function payloadOf(body: string): BrokerMessage['payload'] {
  try {
    return JSON.parse(body) as BrokerMessage['payload'];
  } catch {
    return { key: -1, n: -1, text: body };
  }
}
