import { Logger } from '@nestjs/common';
import type { Channel, ChannelModel, ConsumeMessage } from 'amqplib';
import { delay } from '../../common/delay.util';
import { scrubError } from '../../common/scrub-error.util';
import type { InboxDelivery, OutboxInboxTransport } from '../bridge.types';
import { BrokerLink } from '../broker-link';
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
import { inboxDelivery, type DeliveryContext } from './rabbitmq.delivery';

export interface RabbitMqInboxOptions extends BrokerConnectionOptions {
  /** `amqp(s)://user:pass@host:port/vhost`; never logged (it may hold a password). */
  url: string;
  /** The queue consumed; it must exist (the inbox declares nothing). */
  queue: string;
  /**
   * Unacked messages at most; 500 by default. A batch stored in one transaction takes at most
   * half of them, so the other half arrives meanwhile. What the inbox may hold in memory is
   * `prefetch` × the largest message.
   */
  prefetch?: number;
  /**
   * Where `reject` sends a message: a copy with an `x-outbox-reject-reason` header is published
   * to this exchange (with the message's routing key unless `routingKey` is given) and confirmed
   * before the original is acked. Without it, a rejected message is nacked without requeue, so
   * the queue's own `x-dead-letter-exchange`, if any, takes it (without the reason).
   */
  deadLetter?: { exchange: string; routingKey?: string };
}

/** AMQP's prefetch count is a 16-bit field. */
const MAX_PREFETCH = 65_535;

interface InboxClient {
  connection: ChannelModel;
  channel: Channel;
  consumerTag: string;
}

/**
 * Consumes a RabbitMQ queue for an inbox. Deliveries are handed over in batches of what arrived
 * while the previous batch was being received, in arrival order, one batch at a time. After a
 * reconnect the inbox consumes again by itself; deliveries of the lost channel are dropped, as
 * the broker hands them over again.
 */
export function rabbitMqInbox(options: RabbitMqInboxOptions): OutboxInboxTransport {
  const check = new TransportOptionsCheck('transport', options);
  check.text('queue').integer('prefetch').object('deadLetter');
  const linkOptions = check.connection();
  finishCheck(check, [...urlProblem(options.url), ...deadLetterProblems(options)]);
  const amqp = loadAmqp();
  const { url, queue, deadLetter } = options;
  const prefetch = options.prefetch ?? 500;
  const label = `RabbitMQ inbox "${queue}" (${serverLabel(url)})`;
  const logger = new Logger('OutboxBridge');

  let receive: ((batch: InboxDelivery[]) => Promise<void>) | undefined;
  let closing = false;
  let buffer: Array<{ channel: Channel; delivery: InboxDelivery }> = [];
  let running: Promise<void> | undefined;
  let pumpScheduled = false;
  const waits = new Set<() => void>();

  const wait = async (ms: number): Promise<void> => {
    if (closing) return;
    const timer = delay(ms);
    const stop = (): void => {
      timer.cancel();
      release();
    };
    let release = (): void => undefined;
    waits.add(stop);
    await Promise.race([timer.promise, new Promise<void>((resolve) => (release = resolve))]);
    timer.cancel();
    waits.delete(stop);
  };
  const logReject = (id: string | null, reason: string): void => {
    logger.warn(
      `${label}: rejected message ${id === null ? '(no message id)' : JSON.stringify(id)}: ` +
        `${reason}; nacked to the queue's dead-letter exchange`,
    );
  };

  // Hands the next batch over once the previous one has settled. Scheduled a turn later, so the
  // deliveries of one read from the socket make one batch rather than a batch each.
  const pump = (): void => {
    if (pumpScheduled || running || closing || !receive || buffer.length === 0) return;
    pumpScheduled = true;
    setImmediate(() => {
      pumpScheduled = false;
      const receiver = receive;
      if (running || closing || !receiver || buffer.length === 0) return;
      // Half the prefetch: the broker sends the other half while this half is stored.
      const batch = buffer.splice(0, Math.ceil(prefetch / 2)).map((entry) => entry.delivery);
      // Through an async function, so a receiver that throws at once is caught like one that rejects.
      running = (async () => receiver(batch))()
        .catch((error: unknown) => {
          logger.error(`${label}: receiving a batch failed: ${scrubError(error)}`);
        })
        .finally(() => {
          running = undefined;
          pump();
        });
    });
  };

  const link = new BrokerLink<InboxClient>('rabbitmq', label, linkOptions, {
    open: async (events) => {
      let live = false;
      const ignore = (): boolean => closing || !live;
      const { client } = await openConnection(
        amqp,
        url,
        `outbox inbox for "${queue}"`,
        linkOptions.connectTimeoutMs,
        async (connection, step) => {
          const channel = await connection.createChannel();
          const channels: NodeJS.EventEmitter[] = [connection, channel];
          const report = watch(events, channels, ignore);
          channel.on('close', () => {
            // The broker hands the dead channel's deliveries over again.
            buffer = buffer.filter((entry) => entry.channel !== channel);
          });
          step(`checking queue "${queue}"`);
          await checkQueue(channel, queue);
          let context: DeliveryContext = { channel, wait, logReject };
          if (deadLetter) {
            step('opening the dead-letter channel');
            const confirm = await connection.createConfirmChannel();
            watch(events, [confirm], ignore);
            const publisher = new ConfirmPublisher(confirm);
            context = { ...context, deadLetter: { ...deadLetter, publisher } };
          }
          step(`starting to consume queue "${queue}"`);
          await channel.prefetch(prefetch);
          const onMessage = (msg: ConsumeMessage | null): void => {
            if (msg === null) {
              // The broker cancelled the consumer (the queue was deleted): start over, so the
              // next attempt's checkQueue says what is wrong.
              report(new Error(`RabbitMQ cancelled the consumer of queue "${queue}"`));
              connection.close().catch(() => undefined);
              return;
            }
            if (closing) return;
            buffer.push({ channel, delivery: inboxDelivery(msg, context) });
            pump();
          };
          const { consumerTag } = await channel.consume(queue, onMessage, { noAck: false });
          return { connection, channel, consumerTag };
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
    consume(receiver) {
      if (receive) throw new Error(`${label}: consume() was already called`);
      receive = receiver;
      pump();
    },
    async close(timeoutMs) {
      const began = Date.now();
      closing = true;
      buffer = [];
      for (const stop of [...waits]) stop();
      const client = link.current();
      const bound = delay(timeoutMs);
      // Stop the deliveries first, then let the batch in progress settle what it holds.
      const draining = (async () => {
        if (client) await client.channel.cancel(client.consumerTag).catch(() => undefined);
        await running;
      })();
      await Promise.race([draining, bound.promise]);
      bound.cancel();
      if (running)
        logger.warn(`${label}: the batch in progress did not settle within ${timeoutMs} ms`);
      await link.close(Math.max(0, timeoutMs - (Date.now() - began)));
    },
  };
}

/** The queue, or an error that says it is missing: checkQueue's own is a bare channel close. */
async function checkQueue(channel: Channel, queue: string): Promise<void> {
  try {
    await channel.checkQueue(queue);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 404) {
      throw new Error(
        `RabbitMQ has no queue "${queue}" (declare it, with its bindings, before the inbox starts)`,
      );
    }
    throw error;
  }
}

function deadLetterProblems(options: RabbitMqInboxOptions) {
  const deadLetter: unknown = options.deadLetter;
  const problems = [];
  if (typeof options.prefetch === 'number' && options.prefetch > MAX_PREFETCH) {
    problems.push({
      path: 'transport.prefetch',
      value: options.prefetch,
      messages: [`must be at most ${MAX_PREFETCH}`],
    });
  }
  if (deadLetter === null || typeof deadLetter !== 'object') return problems;
  const { exchange, routingKey } = deadLetter as { exchange?: unknown; routingKey?: unknown };
  return [
    ...problems,
    ...stringProblem('transport.deadLetter.exchange', exchange),
    ...stringProblem('transport.deadLetter.routingKey', routingKey, true),
  ];
}
