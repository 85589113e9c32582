import type { OutboxInboxTransport, OutboxRelayTransport } from '@app/outbox/bridge';
import type { BrokerServer } from '../../support/broker-servers';
import type { BrokerMessage } from './broker-message';

export type { BrokerMessage } from './broker-message';

/**
 * What the conformance suites (test/brokers/conformance) need from a transport: a broker of its
 * kind with an `orders` destination for `order.*` events and a dead-letter destination, the
 * library's relay and inbox transports for it, and a view of what the broker holds. A behaviour
 * both transports share is asserted once against this interface; where the brokers differ on
 * purpose (JetStream's duplicate window, AMQP properties), the driver says how.
 */
export interface BrokerDriver {
  /** The transport as test names call it. */
  readonly name: string;
  /** The `kind` its connections report in health. */
  readonly kind: string;
  /** The relay name the suites register, as `outbox_event.deliveries` records it. */
  readonly relayName: string;
  /**
   * Whether the broker drops a second publish of a message id it already holds (JetStream's
   * duplicate window), so a relay's republish never reaches a consumer. RabbitMQ keeps both
   * copies, and the inbox is what tells them apart.
   */
  readonly dropsRepublishes: boolean;
  /** The header a dead letter carries the inbox's reason in. */
  readonly rejectReasonHeader: string;
  /** A broker of its own, started, with the orders and dead-letter destinations declared. */
  start(): Promise<BrokerUnderTest>;
}

export interface BrokerUnderTest {
  readonly server: BrokerServer;
  /** A relay transport that publishes `order.*` events to the orders destination. */
  relayTransport(options?: RelayTransportOptions): OutboxRelayTransport;
  /**
   * An inbox transport reading the orders destination through a consumer of its own
   * (`billing`), rejecting to the dead-letter destination; declares what it reads.
   */
  inboxTransport(): Promise<OutboxInboxTransport>;
  /** What reached the orders destination since the last take, in broker order. */
  takeOrders(): Promise<BrokerMessage[]>;
  /** Publishes to the orders destination as another producer would, once the broker has it. */
  publish(message: OutgoingMessage): Promise<void>;
  /** Publishes a copy of `message` that the broker stores and delivers again. */
  publishCopy(message: BrokerMessage): Promise<void>;
  /** Waits until the dead-letter destination holds `count` messages, and takes them. */
  takeDeadLetters(count: number): Promise<BrokerMessage[]>;
  /** The subject (NATS) or routing key (RabbitMQ) a relay publishes an event of `type` with. */
  destinationOf(type: string): string;
  /** What a relay records for an event of `type` that the broker has nowhere to put. */
  unroutableError(type: string): string;
  /**
   * Asserts what only this transport puts on a relayed message beside its headers (AMQP's
   * properties); absent where there is nothing more (NATS).
   */
  expectOwnProperties?(message: BrokerMessage, event: { type: string; occurredAt: Date }): void;
  /** Asserts where and how a dead letter of `original` was published. */
  expectDeadLetterEnvelope(dead: BrokerMessage, original: OutgoingMessage): void;
  /** Closes the test's own clients and removes the broker. */
  remove(): Promise<void>;
}

export interface RelayTransportOptions {
  /** Connects there (a proxy in front of the broker) rather than to the broker's own port. */
  port?: number;
  /**
   * Publish timeouts, reconnect backoff and liveness checks of about a second, so that a
   * restarted broker or a silent path is noticed quickly.
   */
  failFast?: boolean;
}

/** A message the test publishes itself, bypassing the relay. */
export interface OutgoingMessage {
  id: string;
  /** The subject (NATS) or routing key (RabbitMQ). */
  destination: string;
  headers: Record<string, string>;
  body: string;
}
