import { connect } from '@nats-io/transport-node';
import { headers as natsHeaders, type NatsConnection } from '@nats-io/nats-core';
import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { natsJetStream, natsJetStreamInbox } from '@app/outbox/bridge';
import { startNatsServer, type BrokerServer } from '../../support/broker-servers';
import type {
  BrokerDriver,
  BrokerMessage,
  BrokerUnderTest,
  OutgoingMessage,
  RelayTransportOptions,
} from './broker-driver';
import { readStream } from './jetstream';
import { pollUntil } from './wait';

/** JetStream: a stream `ORDERS` on `outbox.order.>`, dead letters in `ORDERS_DEAD`. */
export const natsDriver: BrokerDriver = {
  name: 'NATS JetStream',
  kind: 'nats-jetstream',
  relayName: 'to-nats',
  dropsRepublishes: true,
  rejectReasonHeader: 'outbox-reject-reason',
  start: () => NatsBroker.start(),
};

const ORDERS = 'ORDERS';
const DEAD = 'ORDERS_DEAD';
const DEAD_SUBJECT = 'dead.orders';

class NatsBroker implements BrokerUnderTest {
  /** The last sequence of ORDERS that takeOrders returned. */
  private taken = 0;

  private constructor(
    readonly server: BrokerServer,
    private readonly client: NatsConnection,
    private readonly jsm: JetStreamManager,
  ) {}

  static async start(): Promise<NatsBroker> {
    const server = await startNatsServer();
    try {
      // Reconnects for ever: the fault suite restarts and kills the server under it.
      const client = await connect({
        servers: server.url,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 100,
      });
      const jsm = await jetstreamManager(client);
      await jsm.streams.add({ name: ORDERS, subjects: ['outbox.order.>'] });
      await jsm.streams.add({ name: DEAD, subjects: [DEAD_SUBJECT] });
      return new NatsBroker(server, client, jsm);
    } catch (error) {
      await server.remove();
      throw error;
    }
  }

  relayTransport({ port = this.server.port, failFast = false }: RelayTransportOptions = {}) {
    return natsJetStream({
      servers: `nats://127.0.0.1:${port}`,
      ...(failFast && {
        publishTimeoutMs: 1000,
        reconnect: { baseMs: 100, maxMs: 1000 },
        connection: { pingInterval: 1000, maxPingOut: 2 },
      }),
    });
  }

  inboxTransport() {
    return Promise.resolve(
      natsJetStreamInbox({
        servers: this.server.url,
        stream: ORDERS,
        consumer: 'billing',
        deadLetterSubject: DEAD_SUBJECT,
        ackWaitMs: 5000,
      }),
    );
  }

  async takeOrders(): Promise<BrokerMessage[]> {
    const messages = await readStream(this.jsm, ORDERS, this.taken + 1);
    this.taken = messages.at(-1)?.seq ?? this.taken;
    return messages;
  }

  async publish(message: OutgoingMessage): Promise<void> {
    const h = natsHeaders();
    for (const [name, value] of Object.entries(message.headers)) h.set(name, value);
    await jetstream(this.client).publish(message.destination, message.body, {
      headers: h,
      msgID: message.id,
    });
  }

  async publishCopy(message: BrokerMessage): Promise<void> {
    // Under a new Nats-Msg-Id, as a republish past the stream's duplicate window is stored.
    await this.publish({
      id: `${message.id}-again`,
      destination: message.destination,
      headers: message.headers as Record<string, string>,
      body: message.body,
    });
  }

  async takeDeadLetters(count: number): Promise<BrokerMessage[]> {
    await pollUntil(
      async () => (await this.jsm.streams.info(DEAD)).state.messages >= count,
      15_000,
    );
    return readStream(this.jsm, DEAD);
  }

  destinationOf(type: string): string {
    return `outbox.${type}`;
  }

  unroutableError(type: string): string {
    return `Error: no JetStream stream holds the subject "outbox.${type}" (no responders)`;
  }

  expectDeadLetterEnvelope(dead: BrokerMessage): void {
    expect(dead.destination).toBe(DEAD_SUBJECT);
    // Without the original's Nats-Msg-Id, which the duplicate window would otherwise drop.
    expect(dead.id).toBeUndefined();
  }

  async remove(): Promise<void> {
    await this.client.close();
    await this.server.remove();
  }
}
