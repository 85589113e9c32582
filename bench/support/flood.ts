import type { INestApplication } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { DataSource } from 'typeorm';
import { OutboxEngine, OutboxPublisher, type NewOutboxEvent } from '../../libs/outbox/src';
import { createOutboxApp } from './app';
import { sleep } from './database';
import { handlerHooks, resetHandlerHooks, type HandlerKind } from './handlers';
import { summarizeLatency, type LatencySummary } from './percentiles';
import { note } from './report';

/** The flooding partition, and the ten that go on at their usual pace meanwhile. */
export const FLOOD_PARTITION = 'org-A';
export const QUIET_PARTITIONS = Array.from({ length: 10 }, (_, i) => `org-${'BCDEFGHIJK'[i]}`);
/** Events per second of each quiet partition. */
const QUIET_RATE = 10;
/** Events per transaction of the flood, as an import would write them. */
const FLOOD_TRANSACTION = 500;
/** How long the quiet partitions run before the flood: their latency on a calm day. */
const BEFORE_SECONDS = 5;
const TIMEOUT_MS = 600_000;

export interface FloodRun {
  /** Commit → handler latency of the quiet partitions' events before the flood. */
  before: LatencySummary;
  /** The same, of their events committed while the flood was not yet drained. */
  during: LatencySummary;
  /** The flood's events per second, from its first commit to its last event's handler start. */
  floodRate: number;
  /** The engine's slots. */
  slots: number;
  /** The flood's events per second as committed, and the most committed but not yet started. */
  emitRate: number;
  largestBacklog: number;
}

function event(partition: string, i: number): NewOutboxEvent {
  return {
    type: 'invoice.paid',
    aggregateType: 'invoice',
    aggregateId: `${partition}-${i}`,
    organizationId: partition,
    payload: { i, partition },
  };
}

/**
 * One tenant's flood beside ten quiet ones, on one running engine with `handler`: the quiet
 * partitions emit QUIET_RATE events/s each, one per transaction, for BEFORE_SECONDS; then
 * partition A emits `flood` events in transactions of FLOOD_TRANSACTION while they go on, until
 * the flood's last event has reached its handler.
 */
export async function floodRun(
  url: string,
  handler: HandlerKind,
  flood: number,
  outbox: { concurrency?: number; fairness?: { enabled: boolean } } = {},
): Promise<FloodRun> {
  const committed = new Map<string, number>();
  const started = new Map<string, number>();
  let floodStarted = 0;
  let floodLast = 0;
  handlerHooks.onStart = (e, at) => {
    if (e.organizationId === FLOOD_PARTITION) {
      floodStarted++;
      floodLast = at;
    } else if (!started.has(e.id)) started.set(e.id, at);
  };
  let consumer: INestApplication | undefined;
  const producer = await createOutboxApp(url, { handler: null, autoStart: false });
  try {
    consumer = await createOutboxApp(url, { handler, autoStart: true, outbox });
    await sleep(500);
    const publisher = producer.get(OutboxPublisher);
    const dataSource = producer.get(DataSource);
    let stop = false;
    const quiet = (async () => {
      const begin = performance.now();
      const perSecond = QUIET_RATE * QUIET_PARTITIONS.length;
      for (let i = 0; !stop; i++) {
        const wait = begin + (i * 1000) / perSecond - performance.now();
        if (wait > 0) await sleep(wait);
        const partition = QUIET_PARTITIONS[i % QUIET_PARTITIONS.length];
        const id = await dataSource.transaction((manager) =>
          publisher.emit(event(partition, i), { manager }),
        );
        committed.set(id, performance.now());
      }
    })();
    await sleep(BEFORE_SECONDS * 1000);
    const floodFrom = performance.now();
    let largestBacklog = 0;
    for (let first = 0; first < flood; first += FLOOD_TRANSACTION) {
      const events = Array.from({ length: Math.min(FLOOD_TRANSACTION, flood - first) }, (_, k) =>
        event(FLOOD_PARTITION, first + k),
      );
      await dataSource.transaction((manager) => publisher.emit(events, { manager }));
      largestBacklog = Math.max(largestBacklog, first + events.length - floodStarted);
    }
    const emitRate = flood / ((performance.now() - floodFrom) / 1000);
    const deadline = performance.now() + TIMEOUT_MS;
    while (floodStarted < flood && performance.now() < deadline) await sleep(5);
    const floodTo = performance.now();
    stop = true;
    await quiet;
    if (floodStarted < flood) note(`only ${floodStarted} of ${flood} flood events ran`);
    const tail = performance.now() + 30_000;
    while (started.size < committed.size && performance.now() < tail) await sleep(10);
    const latencies = (from: number, to: number) =>
      summarizeLatency(
        [...committed]
          .filter(([id, at]) => at >= from && at < to && started.has(id))
          .map(([id, at]) => Math.max(0, started.get(id)! - at)),
      );
    return {
      before: latencies(0, floodFrom),
      during: latencies(floodFrom, floodTo),
      floodRate: floodStarted / ((floodLast - floodFrom) / 1000),
      slots: consumer.get(OutboxEngine).slots.size,
      emitRate,
      largestBacklog,
    };
  } finally {
    resetHandlerHooks();
    await consumer?.close();
    await producer.close();
  }
}
