import { performance } from 'node:perf_hooks';
import { connect as amqpConnect } from 'amqplib';
import { connect as natsConnect } from '@nats-io/transport-node';
import { AckPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';

/** Unacked messages at most, as the inboxes take by default (their `prefetch`). */
const PREFETCH = 500;
const TIMEOUT_MS = 180_000;

/**
 * The floor an inbox is measured against: a consumer that only reads and acks `total` messages
 * of a JetStream stream (a durable consumer of its own, from the stream's start), in messages/s
 * from its connect to the last ack.
 */
export async function bareJetStreamRate(url: string, stream: string, total: number) {
  const started = performance.now();
  const client = (await natsConnect({ servers: url })) as NatsConnection;
  try {
    await (
      await jetstreamManager(client)
    ).consumers.add(stream, {
      durable_name: 'bare',
      ack_policy: AckPolicy.Explicit,
      max_ack_pending: PREFETCH,
    });
    const reader = await jetstream(client).consumers.get(stream, 'bare');
    const messages = await reader.consume({ max_messages: PREFETCH });
    let acked = 0;
    const deadline = setTimeout(() => void messages.close(), TIMEOUT_MS);
    for await (const message of messages) {
      message.ack();
      if (++acked === total) break;
    }
    clearTimeout(deadline);
    if (acked < total) throw new Error(`bare JetStream consumer: ${acked} of ${total} messages`);
    return total / ((performance.now() - started) / 1000);
  } finally {
    await client.close();
  }
}

/** The same over a RabbitMQ queue: a channel with the inboxes' prefetch, acking each message. */
export async function bareRabbitMqRate(url: string, queue: string, total: number) {
  const started = performance.now();
  const connection = await amqpConnect(url);
  try {
    const channel = await connection.createChannel();
    await channel.prefetch(PREFETCH);
    await new Promise<void>((resolve, reject) => {
      let acked = 0;
      const deadline = setTimeout(
        () => reject(new Error(`bare RabbitMQ consumer: ${acked} of ${total} messages`)),
        TIMEOUT_MS,
      );
      void channel.consume(queue, (message) => {
        if (!message) return;
        channel.ack(message);
        if (++acked === total) {
          clearTimeout(deadline);
          resolve();
        }
      });
    });
    return total / ((performance.now() - started) / 1000);
  } finally {
    await connection.close();
  }
}
