import type { INestApplication } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { DataSource } from 'typeorm';
import { OutboxPublisher } from '../../libs/outbox/src';
import { createOutboxApp } from './app';
import { LATENCY_SECONDS, RATE_PER_SECOND } from './config';
import { sleep } from './database';
import { sampleEvent } from './events';
import { handlerHooks, resetHandlerHooks, type HandlerKind } from './handlers';
import { summarizeLatency, type LatencySummary } from './percentiles';
import { note } from './report';
import { startReferenceListener } from './reference-relay';

/**
 * One event per transaction at RATE_PER_SECOND for LATENCY_SECONDS, the relay idle and woken
 * by NOTIFY: the delay from the producer's commit (right after its transaction resolves) to the
 * first line of the handler, both in this process. A NOTIFY can reach the relay before the
 * producer has read its COMMIT reply; such events count as zero delay.
 */
export async function commitToHandlerLatency(
  url: string,
  relay: { module: HandlerKind } | 'reference',
): Promise<LatencySummary> {
  const started = new Map<string, number>();
  const committed = new Map<string, number>();
  const onHandlerStart = (id: string, at: number) => {
    if (!started.has(id)) started.set(id, at);
  };
  handlerHooks.onStart = (event, at) => onHandlerStart(event.id, at);
  let consumer: INestApplication | undefined;
  let stopReference: (() => Promise<void>) | undefined;
  const producer = await createOutboxApp(url, { handler: 'noop', autoStart: false });
  try {
    if (relay === 'reference') {
      stopReference = await startReferenceListener(url, (id) =>
        onHandlerStart(id, performance.now()),
      );
    } else {
      consumer = await createOutboxApp(url, { handler: relay.module, autoStart: true });
    }
    // Let the relay finish its first look at the empty table before the clock starts.
    await sleep(500);
    const dataSource = producer.get(DataSource);
    const publisher = producer.get(OutboxPublisher);
    const total = Math.round(RATE_PER_SECOND * LATENCY_SECONDS);
    const begin = performance.now();
    for (let i = 0; i < total; i++) {
      const wait = begin + (i * 1000) / RATE_PER_SECOND - performance.now();
      if (wait > 0) await sleep(wait);
      const id = await dataSource.transaction((manager) =>
        publisher.emit(sampleEvent(i), { manager }),
      );
      committed.set(id, performance.now());
    }
    const deadline = performance.now() + 30_000;
    while (started.size < total && performance.now() < deadline) await sleep(10);
    if (started.size < total) note(`only ${started.size} of ${total} events reached a handler`);
    return summarizeLatency(
      [...committed]
        .filter(([id]) => started.has(id))
        .map(([id, at]) => Math.max(0, started.get(id)! - at)),
    );
  } finally {
    resetHandlerHooks();
    await stopReference?.();
    await consumer?.close();
    await producer.close();
  }
}
