import { Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { OnOutboxEvent } from '../handlers/outbox.decorators';
import type { HandlerContext } from '../handlers/outbox-handler.types';
import type { OutboxEvent } from '../outbox-event.types';
import type { OutboxRelayTransport } from './bridge.types';
import type { OutboxBridgeOptions } from './outbox-bridge.options';
import { relayMessage } from './relay-message';
import { AbortableSemaphore } from '../common/abortable-semaphore.util';
import { releaseSlot } from '../handlers/slot-release';
import { abortable } from './abortable';

/** Publishes of one relay waiting for their confirm at once, unless `maxInFlight` says otherwise. */
const DEFAULT_MAX_IN_FLIGHT = 1000;

/** A relay as the app holds it: its transport, connected at boot and closed at shutdown. */
export interface OutboxRelay extends OnModuleInit, OnApplicationShutdown {
  readonly name: string;
  readonly transport: OutboxRelayTransport;
  relay(event: OutboxEvent, context: HandlerContext): Promise<void>;
}

/**
 * A class of its own per relay, whose `relay` method is the named outbox handler: the explorer
 * finds it like any `@OnOutboxEvent` method, so a relay has every guarantee a handler has
 * (deliveries, retries, dead letters, ordering, the module's `handlers` overrides).
 */
export function relayClass(options: OutboxBridgeOptions): new () => OutboxRelay {
  const { name, transport, closeTimeoutMs = 5000 } = options;
  // Bounds the messages awaiting their confirm: a publish that finds it full waits for room
  // holding its slot, which stops the engine from claiming more than the relay can send.
  const inFlight = new AbortableSemaphore(options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT);

  class Relay implements OutboxRelay {
    private readonly logger = new Logger('OutboxBridge');
    readonly name = name;
    readonly transport = transport;

    async onModuleInit(): Promise<void> {
      await transport.connect();
    }

    async onApplicationShutdown(): Promise<void> {
      await transport.close(closeTimeoutMs);
      this.logger.log(`Relay "${name}" closed its ${transport.kind} connection`);
    }

    /**
     * Sends the event and, once the transport says the message is written, gives its slot back
     * while the broker's confirm is on its way, so the slots keep sending: the confirms of up to
     * `maxInFlight` messages are awaited together. The event is still delivered only on its own
     * confirm, and the wait ends with the handler's budget even if a transport ignores its
     * signal, so the place in `maxInFlight` always comes back.
     */
    async relay(event: OutboxEvent, context: HandlerContext): Promise<void> {
      const leave = await inFlight.acquire(context.signal);
      try {
        await abortable(
          transport.publish(relayMessage(event), context.signal, () => releaseSlot(context)),
          context.signal,
        );
      } finally {
        leave();
      }
    }
  }

  const method = Object.getOwnPropertyDescriptor(Relay.prototype, 'relay')!;
  OnOutboxEvent(name, {
    events: options.events,
    ordered: options.ordered,
    timeoutMs: options.timeoutMs,
    retry: options.retry,
    maxAttempts: options.maxAttempts,
  })(Relay.prototype, 'relay', method);
  // Boot errors name the handler's place: `OutboxRelay(to-nats).relay`.
  Object.defineProperty(Relay, 'name', { value: `OutboxRelay(${name})` });
  return Relay;
}
