import { Injectable } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  type OutboxEvent,
  type TransactionalHandlerContext,
} from '../../libs/outbox/src';
import { eventIndex, mixedDelayMs } from './events';

/**
 * The benchmark's handlers. What they record is up to the scenario: it sets `handlerHooks`
 * before it starts an engine (the default records nothing, so a long run keeps no per-event
 * state that would show up in its memory).
 */
export const handlerHooks: {
  /** First line of every handler run. */
  onStart: (event: OutboxEvent, at: number) => void;
  /** After the mixed handler's sleep: how long the run took. */
  onEnd: (event: OutboxEvent, tookMs: number) => void;
} = { onStart: () => undefined, onEnd: () => undefined };

/**
 * Runs of the no-op and effect handlers so far, counted in the process: a burn-down polls the
 * table for its end only once every event has run (see `waitUntilSettled`), so its polls do not
 * take the server from the engine it measures, which the references never pay for.
 */
export const handlerRuns = { count: 0 };

/** Whether every one of `events` has run since `handlerRuns` was last set to 0. */
export const ranAll = (events: number) => () => handlerRuns.count >= events;

export function resetHandlerHooks(): void {
  handlerHooks.onStart = () => undefined;
  handlerHooks.onEnd = () => undefined;
}

@Injectable()
export class NoopHandler {
  @OnOutboxEvent('noop', { events: '*' })
  handle(event: OutboxEvent): void {
    handlerRuns.count++;
    handlerHooks.onStart(event, performance.now());
  }
}

/** Sleeps 2, 20 or 500 ms by the event's index (see `mixedDelayMs`). */
@Injectable()
export class MixedHandler {
  @OnOutboxEvent('mixed', { events: '*' })
  async handle(event: OutboxEvent): Promise<void> {
    const started = performance.now();
    handlerHooks.onStart(event, started);
    await new Promise((resolve) => setTimeout(resolve, mixedDelayMs(eventIndex(event))));
    handlerHooks.onEnd(event, performance.now() - started);
  }
}

/** 20 ms per event, the time of a call to another service. */
@Injectable()
export class TwentyMsHandler {
  @OnOutboxEvent('slow-20ms', { events: '*' })
  async handle(event: OutboxEvent): Promise<void> {
    handlerHooks.onStart(event, performance.now());
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A partner's API that takes 10 requests a second, across every process: 20 ms a call. */
export const RATE_LIMIT = { limit: 10, perMs: 1000 };

@Injectable()
export class RateLimitedHandler {
  @OnOutboxEvent('rate-limited', { events: '*', rate: RATE_LIMIT })
  async handle(event: OutboxEvent): Promise<void> {
    handlerRuns.count++;
    const started = performance.now();
    handlerHooks.onStart(event, started);
    await new Promise((resolve) => setTimeout(resolve, 20));
    handlerHooks.onEnd(event, performance.now() - started);
  }
}

/** A downstream that takes 5 calls at once, across every process: 100 ms a call. */
export const MAX_CONCURRENT = 5;

@Injectable()
export class ConcurrencyLimitedHandler {
  @OnOutboxEvent('concurrency-limited', { events: '*', maxConcurrent: MAX_CONCURRENT })
  async handle(event: OutboxEvent): Promise<void> {
    handlerRuns.count++;
    const started = performance.now();
    handlerHooks.onStart(event, started);
    await new Promise((resolve) => setTimeout(resolve, 100));
    handlerHooks.onEnd(event, performance.now() - started);
  }
}

/** The no-op handler, ordered: each key's events one at a time, in their places. */
@Injectable()
export class OrderedNoopHandler {
  @OnOutboxEvent('ordered-noop', { events: '*', ordered: true })
  handle(event: OutboxEvent): void {
    handlerHooks.onStart(event, performance.now());
  }
}

/** Ordered, 2 ms per event. */
@Injectable()
export class OrderedSlowHandler {
  @OnOutboxEvent('ordered-2ms', { events: '*', ordered: true })
  async handle(event: OutboxEvent): Promise<void> {
    handlerHooks.onStart(event, performance.now());
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/** Ordered, and always fails: its dead events keep their keys blocked (`onDead: 'block'`). */
@Injectable()
export class OrderedPoisonHandler {
  @OnOutboxEvent('ordered-poison', { events: '*', ordered: { onDead: 'block' } })
  handle(): void {
    throw new Error('poison');
  }
}

/** The effect both effect handlers write: one row per event, no unique key. */
export const BENCH_EFFECT_TABLE = `CREATE TABLE IF NOT EXISTS bench_effect (event_id uuid NOT NULL)`;
const INSERT_EFFECT = 'INSERT INTO bench_effect (event_id) VALUES ($1)';

/** Writes its effect in the outbox's transaction, which also records its delivery. */
@Injectable()
export class TransactionalEffectHandler {
  @OnOutboxEvent('tx-effect', { events: '*', transaction: true })
  async handle(event: OutboxEvent, ctx: TransactionalHandlerContext): Promise<void> {
    handlerRuns.count++;
    await ctx.manager.query(INSERT_EFFECT, [event.id]);
  }
}

/** Writes the same effect on its own (autocommit), the way a non-transactional handler would. */
@Injectable()
export class PlainEffectHandler {
  constructor(private readonly dataSource: DataSource) {}

  @OnOutboxEvent('plain-effect', { events: '*' })
  async handle(event: OutboxEvent): Promise<void> {
    handlerRuns.count++;
    await this.dataSource.query(INSERT_EFFECT, [event.id]);
  }
}

export type HandlerKind =
  | 'noop'
  | 'mixed'
  | 'slow-20ms'
  | 'tx-effect'
  | 'plain-effect'
  | 'ordered-noop'
  | 'ordered-2ms'
  | 'ordered-poison'
  | 'rate-limited'
  | 'concurrency-limited';

export const HANDLERS = {
  noop: NoopHandler,
  mixed: MixedHandler,
  'slow-20ms': TwentyMsHandler,
  'tx-effect': TransactionalEffectHandler,
  'plain-effect': PlainEffectHandler,
  'ordered-noop': OrderedNoopHandler,
  'ordered-2ms': OrderedSlowHandler,
  'ordered-poison': OrderedPoisonHandler,
  'rate-limited': RateLimitedHandler,
  'concurrency-limited': ConcurrencyLimitedHandler,
} as const;
