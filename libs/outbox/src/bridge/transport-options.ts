import { InvalidOutboxOptionsError } from '../outbox.errors';
import type { BrokerLinkOptions } from './broker-link';

/** The connection settings every transport takes. */
export interface BrokerConnectionOptions {
  /** Bound on one connection attempt and on the wait for it at boot; 5000 ms by default. */
  connectTimeoutMs?: number;
  /** Backoff between connection attempts; `{ baseMs: 200, maxMs: 10_000 }` by default. */
  reconnect?: { baseMs?: number; maxMs?: number };
}

type Problem = { path: string; value: unknown; messages: string[] };

/**
 * Checks a transport's options where they are given, so a bad one fails the boot with every
 * problem named by its path (`transport.servers`), not the first publish.
 */
export class TransportOptionsCheck {
  private readonly problems: Problem[] = [];

  constructor(
    private readonly prefix: string,
    private readonly options: object,
  ) {
    if (options === null || typeof options !== 'object') {
      throw new InvalidOutboxOptionsError([
        { path: prefix, value: options, messages: ['must be an object'] },
      ]);
    }
  }

  private value(name: string): unknown {
    return (this.options as Record<string, unknown>)[name];
  }

  private refuse(name: string, message: string): void {
    this.problems.push({
      path: `${this.prefix}.${name}`,
      value: this.value(name),
      messages: [message],
    });
  }

  /** A non-empty string, or (with `list`) a non-empty list of them. */
  text(name: string, { optional = false, list = false } = {}): this {
    const value = this.value(name);
    if (value === undefined && optional) return this;
    const items = list && Array.isArray(value) ? (value as unknown[]) : [value];
    if (items.length === 0 || items.some((v) => typeof v !== 'string' || v.trim() === '')) {
      this.refuse(
        name,
        list ? 'must be a non-empty string or a list of them' : 'must be a non-empty string',
      );
    }
    return this;
  }

  /** An integer from `min`, when given. */
  integer(name: string, min = 1): this {
    const value = this.value(name);
    if (value !== undefined && (!Number.isInteger(value) || (value as number) < min)) {
      this.refuse(name, `must be an integer of at least ${min}`);
    }
    return this;
  }

  /** A function, when given. */
  fn(name: string): this {
    const value = this.value(name);
    if (value !== undefined && typeof value !== 'function') this.refuse(name, 'must be a function');
    return this;
  }

  /** A plain object, when given. */
  object(name: string): this {
    const value = this.value(name);
    if (
      value !== undefined &&
      (value === null || typeof value !== 'object' || Array.isArray(value))
    ) {
      this.refuse(name, 'must be an object');
    }
    return this;
  }

  /** The connection settings of `BrokerConnectionOptions`, with their defaults. */
  connection(): BrokerLinkOptions {
    this.integer('connectTimeoutMs');
    this.object('reconnect');
    const given = (this.value('reconnect') ?? {}) as { baseMs?: unknown; maxMs?: unknown };
    const reconnect = { baseMs: given.baseMs ?? 200, maxMs: given.maxMs ?? 10_000 };
    for (const [key, value] of Object.entries(reconnect)) {
      if (!Number.isInteger(value) || (value as number) < 1) {
        this.problems.push({
          path: `${this.prefix}.reconnect.${key}`,
          value,
          messages: ['must be an integer of at least 1'],
        });
      }
    }
    return {
      connectTimeoutMs: (this.value('connectTimeoutMs') as number | undefined) ?? 5000,
      reconnect: reconnect as BrokerLinkOptions['reconnect'],
    };
  }

  /** Throws `InvalidOutboxOptionsError` naming every problem found. */
  done(): void {
    if (this.problems.length > 0) throw new InvalidOutboxOptionsError(this.problems);
  }
}
