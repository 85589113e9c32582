import type { Channel, ChannelModel, ConsumeMessage } from 'amqplib';
import { payloadOf, type BrokerMessage } from './broker-message';

/**
 * Takes every message the queue holds now, in queue order, through a consumer on a channel of
 * its own, acking each: the queue is empty afterwards. For a queue the relay has finished with
 * (every publish confirmed, so the count read first is all there is).
 */
export async function drainQueue(
  connection: ChannelModel,
  queue: string,
  timeoutMs = 30_000,
): Promise<BrokerMessage[]> {
  const channel = await connection.createChannel();
  try {
    const { messageCount } = await channel.checkQueue(queue);
    const out: BrokerMessage[] = [];
    if (messageCount === 0) return out;
    await channel.prefetch(1000);
    let consumerTag: string | undefined;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`drained ${out.length} of ${messageCount} from "${queue}"`)),
        timeoutMs,
      );
      channel
        .consume(queue, (msg: ConsumeMessage | null) => {
          if (msg === null) return reject(new Error(`consumer of "${queue}" cancelled`));
          channel.ack(msg);
          out.push(brokerMessage(msg));
          if (out.length === messageCount) {
            clearTimeout(timer);
            resolve();
          }
        })
        .then((ok) => (consumerTag = ok.consumerTag), reject);
    });
    if (consumerTag) await channel.cancel(consumerTag);
    return out;
  } finally {
    await channel.close().catch(() => undefined);
  }
}

function brokerMessage(msg: ConsumeMessage): BrokerMessage {
  const body = msg.content.toString('utf8');
  return {
    id: msg.properties.messageId as string | undefined,
    destination: msg.fields.routingKey,
    headers: msg.properties.headers ?? {},
    body,
    payload: payloadOf(body),
    properties: msg.properties,
  };
}

/** How many messages the queue holds (ready, not counting unacked ones). */
export async function queueDepth(channel: Channel, queue: string): Promise<number> {
  return (await channel.checkQueue(queue)).messageCount;
}

/** Polls until `queue` holds `expected` messages; fails after `timeoutMs`. */
export async function waitForDepth(
  channel: Channel,
  queue: string,
  expected: number,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = -1;
  while (Date.now() < deadline) {
    last = await queueDepth(channel, queue);
    if (last === expected) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`waited ${timeoutMs} ms for ${expected} messages in "${queue}", last ${last}`);
}
