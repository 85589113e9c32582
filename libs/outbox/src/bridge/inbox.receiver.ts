import { Logger } from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { delay } from '../common/delay.util';
import { scrubError } from '../common/scrub-error.util';
import type { OutboxPublisher } from '../emit/outbox.publisher';
import {
  InvalidOutboxEventError,
  OutboxEventConflictError,
  OutboxPayloadNotSerializableError,
} from '../outbox.errors';
import type { NewOutboxEvent } from '../outbox-event.types';
import type { InboxDelivery, InboxMapper } from './bridge.types';
import { InboxMessageRejection, inboxEventId, relayedEvent } from './inbox-event.mapping';

export interface InboxReceiverOptions {
  name: string;
  toEvent?: InboxMapper;
  maxMessageBytes: number;
  retryDelayMs: number;
}

type Mapped = { delivery: InboxDelivery; event: NewOutboxEvent };

/**
 * Stores each batch of broker messages as events of this service's outbox, in one transaction,
 * and acks them only after it committed. The message id is the event id, so a message the
 * broker hands over again (its ack was lost, the process died before it) is a duplicate emit:
 * a no-op while its row is retained. A message that can never be stored is rejected to the
 * broker's dead letters; one that could not be stored now is handed back for later.
 */
export class InboxReceiver {
  private readonly logger = new Logger('OutboxBridge');
  /** Messages stored, received again, rejected, and held for another try (once per try). */
  readonly counts = { stored: 0, duplicates: 0, rejected: 0, retried: 0 };
  private stopped = false;
  private endPause: () => void = () => undefined;

  constructor(
    private readonly options: InboxReceiverOptions,
    private readonly publisher: OutboxPublisher,
    private readonly dataSource: DataSource,
  ) {}

  async receive(batch: InboxDelivery[]): Promise<void> {
    const mapped: Mapped[] = [];
    for (const delivery of batch) {
      const event = await this.map(delivery);
      if (event) mapped.push({ delivery, event });
    }
    if (mapped.length === 0) return;
    const stored = await this.store(mapped);
    if (stored.refused === undefined) return;
    if (mapped.length === 1) return this.reject(mapped[0].delivery, stored.refused);
    // One bad event refuses the whole batch: store them one by one to find it.
    for (const one of mapped) {
      const alone = await this.store([one]);
      if (alone.refused !== undefined) await this.reject(one.delivery, alone.refused);
    }
  }

  private async map(delivery: InboxDelivery): Promise<NewOutboxEvent | undefined> {
    const { message } = delivery;
    try {
      if (message.body.length > this.options.maxMessageBytes) {
        throw new InboxMessageRejection(
          `the body has ${message.body.length} bytes, more than maxMessageBytes (${this.options.maxMessageBytes})`,
        );
      }
      if (!this.options.toEvent) return relayedEvent(message);
      const event = this.options.toEvent(message);
      // Without the message's id, a message received twice would be two events.
      return event.id ? event : { ...event, id: inboxEventId(message, undefined) };
    } catch (error) {
      await this.reject(delivery, error);
      return undefined;
    }
  }

  /**
   * Emits and commits, then acks; says why when the outbox refused an event (invalid, or another
   * event's id), and does nothing more then. A store that fails (the database is away, a
   * statement timed out) is tried again with the same batch, in place, every `retryDelayMs`: the
   * messages stay unacked meanwhile and nothing behind them is taken, so a key's events are
   * stored in the order they came. Handing the batch back to the broker instead would let the
   * messages already prefetched behind it overtake it. At shutdown the batch is handed back.
   */
  private async store(items: Mapped[]): Promise<{ refused?: unknown }> {
    for (let attempt = 1; ; attempt++) {
      let results: Array<{ duplicate: boolean }>;
      try {
        results = await this.dataSource.transaction((manager) =>
          this.publisher.emit(
            items.map((i) => i.event),
            { manager, returning: 'result' },
          ),
        );
      } catch (error) {
        if (isRefusal(error)) return { refused: error };
        this.counts.retried += items.length;
        if (attempt === 1 || attempt % 30 === 0) {
          this.logger.warn(
            `Inbox "${this.options.name}": ${items.length} message(s) not stored (try ${attempt}), ` +
              `trying again every ${this.options.retryDelayMs} ms: ${scrubError(error)}`,
          );
        }
        if (!(await this.pause())) {
          await Promise.all(items.map((i) => settle(i.delivery.retryLater(0))));
          return {};
        }
        for (const { delivery } of items) delivery.working?.();
        continue;
      }
      for (const result of results) this.counts[result.duplicate ? 'duplicates' : 'stored']++;
      // Committed: an ack lost now only means the broker hands it over again, a duplicate.
      await Promise.all(items.map((i) => settle(i.delivery.ack())));
      return {};
    }
  }

  /** Waits `retryDelayMs`; false when the inbox stops meanwhile (or had stopped). */
  private async pause(): Promise<boolean> {
    if (this.stopped) return false;
    const wait = delay(this.options.retryDelayMs);
    await Promise.race([wait.promise, new Promise<void>((resolve) => (this.endPause = resolve))]);
    wait.cancel();
    return !this.stopped;
  }

  /** Ends a retry in progress: its batch goes back to the broker. Called at shutdown. */
  stop(): void {
    this.stopped = true;
    this.endPause();
  }

  private async reject(delivery: InboxDelivery, error: unknown): Promise<void> {
    // A rejection of the mapping says what it found, plainly; anything else says what it was.
    const reason =
      error instanceof InboxMessageRejection
        ? scrubError(error.message, 500)
        : scrubError(error, 500);
    this.counts.rejected++;
    this.logger.warn(
      `Inbox "${this.options.name}": message ${delivery.message.id ?? '(no id)'} rejected: ${reason}`,
    );
    try {
      await delivery.reject(reason);
    } catch (failure) {
      // Not dead-lettered (the dead-letter exchange or subject is missing, the broker is away):
      // the message goes back to the broker and is rejected again when it returns, not left
      // holding its prefetch slot.
      this.logger.warn(
        `Inbox "${this.options.name}": message ${delivery.message.id ?? '(no id)'} not ` +
          `dead-lettered, handed back: ${scrubError(failure)}`,
      );
      await settle(delivery.retryLater(this.options.retryDelayMs));
    }
  }
}

function isRefusal(error: unknown): boolean {
  return (
    error instanceof InvalidOutboxEventError ||
    error instanceof OutboxEventConflictError ||
    error instanceof OutboxPayloadNotSerializableError
  );
}

/** Acks and rejects that fail leave the message with the broker, which hands it over again. */
async function settle(work: Promise<void>): Promise<void> {
  await work.catch(() => undefined);
}
