import { randomUUID } from 'node:crypto';
import type { Channel, ConsumeMessage, Options } from 'amqplib';
import type { InboxDelivery, InboxMessage } from '../bridge.types';
import { RETURN_KEY_HEADER, type ConfirmPublisher } from './rabbitmq.client';

/** The header a dead-lettered copy carries with the inbox's (scrubbed) reason. */
export const REJECT_REASON_HEADER = 'x-outbox-reject-reason';

/**
 * Longest `retryLater` wait: the message stays unacked meanwhile, holding a prefetch slot, and
 * RabbitMQ closes a channel whose delivery stays unacked past `consumer_timeout` (30 min).
 */
export const MAX_RETRY_DELAY_MS = 60_000;

/** Bound on the wait for the confirm of a dead-lettered copy. */
export const DEAD_LETTER_CONFIRM_TIMEOUT_MS = 5000;

export interface DeliveryContext {
  channel: Channel;
  /** The confirm channel copies are dead-lettered on, when `deadLetter` is set. */
  deadLetter?: { publisher: ConfirmPublisher; exchange: string; routingKey?: string };
  /** Waits `ms`, or less when the inbox closes. */
  wait(ms: number): Promise<void>;
  /** Logs a rejection without a dead-letter exchange of ours (the queue's own takes it). */
  logReject(id: string | null, reason: string): void;
}

/** The inbox's view of a RabbitMQ message: string headers only, and the delivery number. */
export function inboxMessage(msg: ConsumeMessage): InboxMessage {
  const headers: Record<string, string> = {};
  const raw = (msg.properties.headers ?? {}) as Record<string, unknown>;
  for (const [name, value] of Object.entries(raw)) {
    // Tables and arrays (x-death) and byte arrays have no faithful string form.
    if (typeof value === 'string') headers[name] = value;
    else if (['number', 'boolean', 'bigint'].includes(typeof value)) headers[name] = String(value);
  }
  const messageId: unknown = msg.properties.messageId;
  return {
    id: typeof messageId === 'string' ? messageId : null,
    headers,
    body: msg.content,
    source: msg.fields.routingKey,
    deliveryCount: deliveryCount(raw['x-delivery-count'], msg.fields.redelivered),
  };
}

/**
 * Quorum queues count returns in `x-delivery-count`: absent on the first delivery, 1 on the
 * second. Classic queues only say whether the message was delivered before.
 */
function deliveryCount(header: unknown, redelivered: boolean): number | null {
  const count = typeof header === 'bigint' ? Number(header) : header;
  if (typeof count === 'number' && Number.isFinite(count)) return count + 1;
  return redelivered ? null : 1;
}

/**
 * One delivery with its settlements. Each settles at most once: a second ack of a delivery tag
 * is a channel error (PRECONDITION_FAILED) that would kill every other delivery of the channel.
 * A delivery of a channel that has since died settles as a no-op: the broker hands the message
 * over again on a new channel.
 */
export function inboxDelivery(msg: ConsumeMessage, context: DeliveryContext): InboxDelivery {
  const { channel } = context;
  const message = inboxMessage(msg);
  let settled = false;
  const settle = (action: () => void): void => {
    if (settled) return;
    settled = true;
    try {
      action();
    } catch {
      // IllegalOperationError: the channel is closed; its unacked messages are redelivered.
    }
  };
  return {
    message,
    ack: () => {
      settle(() => channel.ack(msg));
      return Promise.resolve();
    },
    retryLater: async (delayMs) => {
      if (settled) return;
      await context.wait(Math.min(Math.max(0, delayMs), MAX_RETRY_DELAY_MS));
      settle(() => channel.nack(msg, false, true));
    },
    reject: async (reason) => {
      if (settled) return;
      const deadLetter = context.deadLetter;
      if (!deadLetter) {
        settle(() => channel.nack(msg, false, false));
        context.logReject(message.id, reason);
        return;
      }
      // Throws, leaving the message unsettled, when the copy is not confirmed: the caller can
      // hand it back with retryLater.
      await deadLetter.publisher.publish(
        deadLetter.exchange,
        deadLetter.routingKey ?? msg.fields.routingKey,
        msg.content,
        deadLetterProperties(msg, reason),
        undefined,
        DEAD_LETTER_CONFIRM_TIMEOUT_MS,
      );
      settle(() => channel.ack(msg));
    },
  };
}

/**
 * The original's properties with the reason added, published mandatory so a dead-letter
 * exchange that routes nowhere fails the reject instead of losing the message. `userId` is
 * left out: the broker refuses a user id other than the publishing connection's own, and the
 * refusal closes the channel.
 */
function deadLetterProperties(msg: ConsumeMessage, reason: string): Options.Publish {
  const original = msg.properties as unknown as Record<string, unknown>;
  const properties: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(original)) {
    if (value !== undefined && name !== 'userId' && name !== 'headers') properties[name] = value;
  }
  const headers: Record<string, unknown> = {
    ...(original.headers as Record<string, unknown> | undefined),
    [REJECT_REASON_HEADER]: reason,
  };
  // A copy without a message id is matched to its possible return by a key of its own.
  if (typeof properties.messageId !== 'string') headers[RETURN_KEY_HEADER] = randomUUID();
  return { ...properties, headers, mandatory: true };
}
