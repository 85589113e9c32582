import type { OnOutboxEventOptions } from '../handlers/outbox-handler.types';
import { InvalidOutboxOptionsError } from '../outbox.errors';
import type { OutboxRelayTransport } from './bridge.types';

/** `OutboxBridgeModule.forRoot`: one relay, a named outbox handler that sends to a broker. */
export interface OutboxBridgeOptions extends Pick<
  OnOutboxEventOptions,
  'ordered' | 'timeoutMs' | 'retry' | 'maxAttempts'
> {
  /** The relay's handler name (kebab-case, persisted in each event's deliveries). */
  name: string;
  /** The event types relayed, or `'*'` for every type. */
  events: readonly string[] | '*';
  /** `natsJetStream({ ... })`, `rabbitMq({ ... })`, or a transport of your own. */
  transport: OutboxRelayTransport;
  /** Bound on closing the broker connection at shutdown; 5000 ms by default. */
  closeTimeoutMs?: number;
  /**
   * Messages sent and waiting for the broker's confirm at once; 1000 by default. A relay holds
   * an engine slot only while it sends, so this, not `concurrency`, bounds its messages out.
   */
  maxInFlight?: number;
}

const TRANSPORT_METHODS = ['connect', 'publish', 'close', 'status'] as const;

/** Fails the boot on a relay that could never send, naming the field. */
export function assertBridgeOptions(options: OutboxBridgeOptions): void {
  const problems: Array<{ path: string; value: unknown; messages: string[] }> = [];
  const transport = options?.transport as unknown as Record<string, unknown> | undefined;
  if (!transport || typeof transport !== 'object') {
    problems.push({
      path: 'transport',
      value: transport,
      messages: ['must be a transport, for example natsJetStream({ servers })'],
    });
  } else {
    for (const method of TRANSPORT_METHODS) {
      if (typeof transport[method] !== 'function') {
        problems.push({
          path: `transport.${method}`,
          value: transport[method],
          messages: ['must be a function (see OutboxRelayTransport)'],
        });
      }
    }
  }
  for (const path of ['closeTimeoutMs', 'maxInFlight'] as const) {
    const value = options?.[path];
    if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
      problems.push({ path, value, messages: ['must be an integer of at least 1'] });
    }
  }
  if (problems.length > 0) throw new InvalidOutboxOptionsError(problems);
}
