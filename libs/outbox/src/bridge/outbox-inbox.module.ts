import {
  Logger,
  Module,
  type BeforeApplicationShutdown,
  type DynamicModule,
  type OnApplicationBootstrap,
  type OnModuleInit,
} from '@nestjs/common';
import type { DataSource } from 'typeorm';
import { OutboxPublisher } from '../emit/outbox.publisher';
import { InvalidOutboxOptionsError } from '../outbox.errors';
import { OUTBOX_DATA_SOURCE } from '../outbox.tokens';
import type { InboxMapper, OutboxInboxTransport } from './bridge.types';
import { BridgeConnections } from './bridge-connections';
import { OutboxBridgeCoreModule } from './bridge-core.module';
import { InboxReceiver } from './inbox.receiver';

/** `OutboxInboxModule.forRoot`: one inbox, receiving a broker's messages into this outbox. */
export interface OutboxInboxOptions {
  /** The inbox's name, for logs and health (kebab-case). */
  name: string;
  /** `natsJetStreamInbox({ ... })`, `rabbitMqInbox({ ... })`, or a transport of your own. */
  transport: OutboxInboxTransport;
  /**
   * Turns a message into the event to emit; throw to reject it. By default the relay's headers
   * and JSON body are read, and a message without them is rejected.
   */
  toEvent?: InboxMapper;
  /** Larger messages are rejected; 1 MiB by default. */
  maxMessageBytes?: number;
  /**
   * How long the inbox waits before it tries again to store a batch the database did not take;
   * 1000 ms by default. The batch is held (unacked) meanwhile, so the order of messages holds.
   */
  retryDelayMs?: number;
  /** Bound on finishing the batch in hand and closing at shutdown; 5000 ms by default. */
  closeTimeoutMs?: number;
}

/** The injection token of the inbox named `name`. */
export const getOutboxInboxToken = (name: string): string => `OutboxInbox:${name}`;

const KEBAB_CASE = /^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/;

/** An inbox as the app holds it: connected at boot, consuming once the app is up. */
export class OutboxInbox
  implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown
{
  private readonly logger = new Logger('OutboxBridge');
  readonly receiver: InboxReceiver;

  constructor(
    private readonly options: OutboxInboxOptions,
    publisher: OutboxPublisher,
    dataSource: DataSource,
  ) {
    this.receiver = new InboxReceiver(
      {
        name: options.name,
        toEvent: options.toEvent,
        maxMessageBytes: options.maxMessageBytes ?? 1024 * 1024,
        retryDelayMs: options.retryDelayMs ?? 1000,
      },
      publisher,
      dataSource,
    );
  }

  get transport(): OutboxInboxTransport {
    return this.options.transport;
  }

  async onModuleInit(): Promise<void> {
    await this.transport.connect();
  }

  /** After every module's init: the outbox's emit is ready, and so are the app's handlers. */
  onApplicationBootstrap(): void {
    this.transport.consume((batch) => this.receiver.receive(batch));
  }

  /** Before the DataSource closes: the batch in hand is stored and acked, or handed back. */
  async beforeApplicationShutdown(): Promise<void> {
    this.receiver.stop();
    await this.transport.close(this.options.closeTimeoutMs ?? 5000);
    this.logger.log(`Inbox "${this.options.name}" closed its ${this.transport.kind} connection`);
  }
}

/**
 * Receives a broker's messages (a JetStream durable consumer, a RabbitMQ queue) into this
 * service's outbox: each is emitted with its message id as the event id, in one transaction,
 * and acked after the commit. The app's `@OnOutboxEvent` handlers then run on it with every
 * guarantee they have. Needs `OutboxModule` (global) in the app.
 */
@Module({})
export class OutboxInboxModule {
  static forRoot(options: OutboxInboxOptions): DynamicModule {
    assertInboxOptions(options);
    const token = getOutboxInboxToken(options.name);
    return {
      module: OutboxInboxModule,
      imports: [OutboxBridgeCoreModule],
      providers: [
        {
          provide: token,
          inject: [OutboxPublisher, OUTBOX_DATA_SOURCE, BridgeConnections],
          useFactory: (
            publisher: OutboxPublisher,
            dataSource: DataSource,
            connections: BridgeConnections,
          ) => {
            const inbox = new OutboxInbox(options, publisher, dataSource);
            connections.add({
              name: options.name,
              role: 'inbox',
              status: () => inbox.transport.status(),
            });
            return inbox;
          },
        },
      ],
      exports: [token],
    };
  }
}

function assertInboxOptions(options: OutboxInboxOptions): void {
  const problems: Array<{ path: string; value: unknown; messages: string[] }> = [];
  const refuse = (path: string, value: unknown, message: string) =>
    problems.push({ path, value, messages: [message] });
  if (typeof options?.name !== 'string' || !KEBAB_CASE.test(options.name)) {
    refuse('name', options?.name, 'must be kebab-case, for example "from-billing"');
  }
  const transport = options?.transport as unknown as Record<string, unknown> | undefined;
  for (const method of ['connect', 'consume', 'close', 'status']) {
    if (typeof transport?.[method] !== 'function') {
      refuse(
        `transport.${method}`,
        transport?.[method],
        'must be a function (see OutboxInboxTransport)',
      );
    }
  }
  if (options?.toEvent !== undefined && typeof options.toEvent !== 'function') {
    refuse('toEvent', options.toEvent, 'must be a function');
  }
  for (const field of ['maxMessageBytes', 'retryDelayMs', 'closeTimeoutMs'] as const) {
    const value = options?.[field];
    if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
      refuse(field, value, 'must be an integer of at least 1');
    }
  }
  if (problems.length > 0) throw new InvalidOutboxOptionsError(problems);
}
