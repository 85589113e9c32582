import { connect as amqpConnect, type Channel, type ChannelModel } from 'amqplib';
import { rabbitMq, rabbitMqInbox } from '@app/outbox/bridge';
import { startRabbitMq, type BrokerServer } from '../../support/broker-servers';
import type {
  BrokerDriver,
  BrokerMessage,
  BrokerUnderTest,
  OutgoingMessage,
  RelayTransportOptions,
} from './broker-driver';
import { drainQueue, waitForDepth } from './rabbitmq';

/**
 * RabbitMQ: a topic exchange `orders` with the queue `orders.all` on `order.#`, dead letters
 * through the exchange `orders.dead` into `billing.dead`.
 */
export const rabbitMqDriver: BrokerDriver = {
  name: 'RabbitMQ',
  kind: 'rabbitmq',
  relayName: 'to-rabbit',
  dropsRepublishes: false,
  rejectReasonHeader: 'x-outbox-reject-reason',
  start: () => RabbitMqBroker.start(),
};

const EXCHANGE = 'orders';
/** Bound like the inbox's queue, read by the test only: what the relay published. */
const TAP_QUEUE = 'orders.all';
const INBOX_QUEUE = 'billing';
const DEAD_EXCHANGE = 'orders.dead';
const DEAD_QUEUE = 'billing.dead';

class RabbitMqBroker implements BrokerUnderTest {
  private constructor(readonly server: BrokerServer) {}

  static async start(): Promise<RabbitMqBroker> {
    const server = await startRabbitMq();
    const broker = new RabbitMqBroker(server);
    try {
      await broker.withChannel(async (channel) => {
        await channel.assertExchange(EXCHANGE, 'topic', { durable: true });
        await channel.assertQueue(TAP_QUEUE, { durable: true });
        await channel.bindQueue(TAP_QUEUE, EXCHANGE, 'order.#');
        await channel.assertExchange(DEAD_EXCHANGE, 'topic', { durable: true });
        await channel.assertQueue(DEAD_QUEUE, { durable: true });
        await channel.bindQueue(DEAD_QUEUE, DEAD_EXCHANGE, '#');
      });
    } catch (error) {
      await server.remove();
      throw error;
    }
    return broker;
  }

  relayTransport({ port = this.server.port, failFast = false }: RelayTransportOptions = {}) {
    return rabbitMq({
      // A 1 s heartbeat rather than the library's 5 s notices a silent path sooner.
      url: `amqp://guest:guest@127.0.0.1:${port}${failFast ? '?heartbeat=1' : ''}`,
      exchange: EXCHANGE,
      ...(failFast && {
        publishTimeoutMs: 1000,
        connectTimeoutMs: 2000,
        reconnect: { baseMs: 100, maxMs: 1000 },
      }),
    });
  }

  async inboxTransport() {
    // Declared only with an inbox: a queue nobody consumes would keep every relayed message.
    await this.withChannel(async (channel) => {
      await channel.assertQueue(INBOX_QUEUE, { durable: true });
      await channel.bindQueue(INBOX_QUEUE, EXCHANGE, 'order.#');
    });
    return rabbitMqInbox({
      url: this.server.url,
      queue: INBOX_QUEUE,
      deadLetter: { exchange: DEAD_EXCHANGE },
    });
  }

  takeOrders(): Promise<BrokerMessage[]> {
    return this.withConnection((connection) => drainQueue(connection, TAP_QUEUE));
  }

  publish(message: OutgoingMessage): Promise<void> {
    return this.withConnection(async (connection) => {
      const channel = await connection.createConfirmChannel();
      await new Promise<void>((resolve, reject) => {
        channel.publish(
          EXCHANGE,
          message.destination,
          Buffer.from(message.body),
          {
            persistent: true,
            messageId: message.id,
            contentType: 'application/json',
            headers: message.headers,
          },
          (error) => (error ? reject(error as Error) : resolve()),
        );
      });
      await channel.close();
    });
  }

  async publishCopy(message: BrokerMessage): Promise<void> {
    // As it was: RabbitMQ keeps every copy, whatever its message id.
    await this.publish({
      id: message.id!,
      destination: message.destination,
      headers: message.headers as Record<string, string>,
      body: message.body,
    });
  }

  async takeDeadLetters(count: number): Promise<BrokerMessage[]> {
    await this.withChannel((channel) => waitForDepth(channel, DEAD_QUEUE, count, 15_000));
    return this.withConnection((connection) => drainQueue(connection, DEAD_QUEUE));
  }

  destinationOf(type: string): string {
    return type;
  }

  unroutableError(type: string): string {
    return (
      'RabbitMqPublishError: RabbitMQ returned the message: no queue is bound to ' +
      `exchange "${EXCHANGE}" for routing key "${type}" (312 NO_ROUTE)`
    );
  }

  expectOwnProperties(message: BrokerMessage, event: { type: string; occurredAt: Date }): void {
    const properties = message.properties!;
    expect(properties.deliveryMode).toBe(2);
    expect(properties.contentType).toBe('application/json');
    expect(properties.type).toBe(event.type);
    expect(properties.timestamp).toBe(Math.floor(event.occurredAt.getTime() / 1000));
  }

  expectDeadLetterEnvelope(dead: BrokerMessage, original: OutgoingMessage): void {
    // Through the dead-letter exchange under the routing key and message id it came with.
    expect(dead.id).toBe(original.id);
    expect(dead.destination).toBe(original.destination);
  }

  async remove(): Promise<void> {
    await this.server.remove();
  }

  /**
   * A connection of the test's own for `use`, straight to the broker and closed after: one held
   * across tests would not survive the restarts of the fault suite.
   */
  private async withConnection<T>(use: (connection: ChannelModel) => Promise<T>): Promise<T> {
    const connection = await amqpConnect(this.server.url);
    try {
      return await use(connection);
    } finally {
      await connection.close().catch(() => undefined);
    }
  }

  private withChannel<T>(use: (channel: Channel) => Promise<T>): Promise<T> {
    return this.withConnection(async (connection) => use(await connection.createChannel()));
  }
}
