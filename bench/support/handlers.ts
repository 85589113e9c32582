import { Injectable } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { OnOutboxEvent, type OutboxEvent } from '../../libs/outbox/src';
import { eventIndex, mixedDelayMs } from './events';

/**
 * The benchmark's handlers. What they record is up to the scenario: it sets `handlerHooks`
 * before it starts a dispatcher (the default records nothing, so a long run keeps no per-event
 * state that would show up in its memory).
 */
export const handlerHooks: {
  /** First line of every handler run. */
  onStart: (event: OutboxEvent, at: number) => void;
  /** After the mixed handler's sleep: how long the run took. */
  onEnd: (event: OutboxEvent, tookMs: number) => void;
} = { onStart: () => undefined, onEnd: () => undefined };

export function resetHandlerHooks(): void {
  handlerHooks.onStart = () => undefined;
  handlerHooks.onEnd = () => undefined;
}

@Injectable()
export class NoopHandler {
  @OnOutboxEvent('noop', { events: '*' })
  handle(event: OutboxEvent): void {
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

export type HandlerKind = 'noop' | 'mixed';

export const HANDLERS = { noop: NoopHandler, mixed: MixedHandler } as const;
