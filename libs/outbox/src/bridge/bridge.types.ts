import type { NewOutboxEvent, OutboxEvent } from '../outbox-event.types';

/** Where a broker connection stands, as health reports it. */
export type BrokerConnectionState = 'connecting' | 'connected' | 'reconnecting' | 'closed';

export interface BrokerConnectionStatus {
  /** The transport's kind, for example `nats-jetstream` or `rabbitmq`. */
  kind: string;
  state: BrokerConnectionState;
  /** Since when (ISO time) the connection has been in this state. */
  since: string;
  /** Why the connection was last lost or refused, scrubbed; null while none was. */
  lastError: string | null;
}

/**
 * A message as a relay sends it: the event's id, its headers (see `relayHeaders`) and its payload
 * as JSON. Each transport maps the event to its own destination (a subject, an exchange and
 * routing key).
 */
export interface OutboxRelayMessage {
  event: OutboxEvent;
  headers: Readonly<Record<string, string>>;
  body: Buffer;
}

/**
 * What a relay needs of a broker. `publish` resolves only when the broker has taken the message
 * for good (a JetStream publish ack, a RabbitMQ publisher confirm) and rejects otherwise; a
 * message published twice (after a crash between the confirm and the settle) carries the same
 * event id both times, for the broker's or the receiver's deduplication. A transport for another
 * broker implements this interface: see docs/across-services.md.
 */
export interface OutboxRelayTransport {
  readonly kind: string;
  /**
   * Opens the connection. Resolves once connected or once `connectTimeoutMs` has passed, whichever
   * comes first; a broker that is not there yet is retried in the background with backoff, and
   * publishes fail (so events retry) until it is.
   */
  connect(): Promise<void>;
  /**
   * Sends one message and waits for the broker's confirm, within `signal`. Call `sent` once the
   * message is written to the connection (before the confirm comes back): the relay then gives
   * its engine slot back and awaits the confirm among its `maxInFlight`. A transport that never
   * calls it keeps the slot until the confirm, as every handler does.
   */
  publish(message: OutboxRelayMessage, signal: AbortSignal, sent?: () => void): Promise<void>;
  /** Closes the connection, giving up after `timeoutMs`. */
  close(timeoutMs: number): Promise<void>;
  status(): BrokerConnectionStatus;
}

/** One message an inbox took from its broker. */
export interface InboxMessage {
  /** The broker's message id (`Nats-Msg-Id`, AMQP `message_id`), or null when it has none. */
  id: string | null;
  headers: Readonly<Record<string, string>>;
  body: Buffer;
  /** Where it came from (a subject, a routing key), for a mapping that needs it. */
  source: string;
  /** How many times the broker has handed this message over, when it says (1 the first time). */
  deliveryCount: number | null;
}

/**
 * Turns a broker message into the event the inbox emits; throw to reject the message. An event
 * without an `id` gets the message's (see `inboxEventId`), so a message received twice stays one
 * event.
 */
export type InboxMapper = (message: InboxMessage) => NewOutboxEvent;

/** One message as an inbox transport hands it over, with what it can do to it. */
export interface InboxDelivery {
  message: InboxMessage;
  /** Removes the message from the broker: it is stored. */
  ack(): Promise<void>;
  /** Hands the message back for a later delivery (the inbox stops before it could store it). */
  retryLater(delayMs: number): Promise<void>;
  /**
   * Tells the broker the message is still being worked on, where it has such a notion (a
   * JetStream ack deadline): the inbox holds a batch while it retries storing it.
   */
  working?(): void;
  /** Sends the message to the broker's dead-letter mechanism, with a scrubbed reason. */
  reject(reason: string): Promise<void>;
}

/**
 * What an inbox needs of a broker: a stream of deliveries, at most `prefetch` unsettled at once.
 * `consume` calls `receive` with each batch of deliveries that arrived together; the next batch
 * comes when the promise settles.
 */
export interface OutboxInboxTransport {
  readonly kind: string;
  connect(): Promise<void>;
  consume(receive: (batch: InboxDelivery[]) => Promise<void>): void;
  close(timeoutMs: number): Promise<void>;
  status(): BrokerConnectionStatus;
}
