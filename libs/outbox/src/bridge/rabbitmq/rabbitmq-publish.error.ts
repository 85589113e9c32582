import { OutboxError } from '../../outbox.errors';

/** Why a publish to RabbitMQ did not count as delivered. */
export type RabbitMqPublishFailure = 'returned' | 'nacked' | 'timeout' | 'closed' | 'aborted';

/**
 * A relay's publish that RabbitMQ did not confirm: returned unroutable, nacked, not confirmed in
 * time, cut by a closed channel, or given up when the handler's budget ran out. In a file of its
 * own, so the package's declarations reach it without amqplib's types (an optional peer).
 */
export class RabbitMqPublishError extends OutboxError {
  constructor(
    readonly failure: RabbitMqPublishFailure,
    message: string,
  ) {
    super(message);
  }
}
