import { performance } from 'node:perf_hooks';
import { context, metrics, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  SimpleSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import type { Client } from 'pg';
import { DataSource } from 'typeorm';
import { OutboxEngine, OutboxPublisher } from '../../libs/outbox/src';
import { createOutboxApp } from '../support/app';
import { waitUntilSettled, withFreshDatabase } from '../support/database';
import { sampleEvent } from '../support/events';
import { count, note, times } from '../support/report';
import type { Scenario } from './scenario';

const TIMEOUT_MS = 120_000;
const EMITS = 2000;

class Reader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** Takes every span and keeps none: the cost of recording, not of shipping. */
class DroppingExporter implements SpanExporter {
  spans = 0;
  export(spans: ReadableSpan[], done: (result: { code: number }) => void): void {
    this.spans += spans.length;
    done({ code: 0 });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** Emits EMITS events (one per transaction, each in a request span), then burns them down. */
async function emitAndBurnDown(
  url: string,
  sql: Client,
): Promise<{ emitMs: number; burnDown: number }> {
  await sql.query('TRUNCATE outbox_event');
  const app = await createOutboxApp(url, { handler: 'noop', autoStart: false });
  try {
    const dataSource = app.get(DataSource);
    const publisher = app.get(OutboxPublisher);
    const tracer = trace.getTracer('bench');
    let t = performance.now();
    for (let i = 0; i < EMITS; i++) {
      await tracer.startActiveSpan('request', async (span) => {
        await dataSource.transaction((manager) => publisher.emit(sampleEvent(i), { manager }));
        span.end();
      });
    }
    const emitMs = (performance.now() - t) / EMITS;
    await sql.query('VACUUM ANALYZE outbox_event');
    t = performance.now();
    await app.get(OutboxEngine).start();
    await waitUntilSettled(sql, TIMEOUT_MS);
    return { emitMs, burnDown: EMITS / ((performance.now() - t) / 1000) };
  } finally {
    await app.close();
  }
}

/**
 * What OpenTelemetry costs when the app turns it on: emit and a no-op burn-down with the API
 * alone (no SDK: every call a no-op) next to the same with a MeterProvider, a TracerProvider
 * (every span recorded, then dropped), the W3C propagator and AsyncLocalStorage context.
 */
export const telemetry: Scenario = {
  name: 'telemetry',
  title: `OpenTelemetry on vs off: emit and burn-down of ${EMITS} events`,
  run: (server) =>
    withFreshDatabase(server, 'telemetry', async (db) => {
      const off = await emitAndBurnDown(db.url, db.sql);
      const reader = new Reader();
      const meterProvider = new MeterProvider({ readers: [reader] });
      const exporter = new DroppingExporter();
      const tracerProvider = new BasicTracerProvider({
        spanProcessors: [new SimpleSpanProcessor(exporter)],
      });
      metrics.setGlobalMeterProvider(meterProvider);
      trace.setGlobalTracerProvider(tracerProvider);
      context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
      propagation.setGlobalPropagator(new W3CTraceContextPropagator());
      let on: { emitMs: number; burnDown: number };
      try {
        on = await emitAndBurnDown(db.url, db.sql);
        await reader.collect();
      } finally {
        // The later scenarios run without it, as they always have.
        metrics.disable();
        trace.disable();
        context.disable();
        propagation.disable();
        await meterProvider.shutdown();
        await tracerProvider.shutdown();
      }
      note(`off: emit ${off.emitMs.toFixed(3)} ms, burn-down ${count(off.burnDown)} events/s`);
      note(
        `on:  emit ${on.emitMs.toFixed(3)} ms, burn-down ${count(on.burnDown)} events/s, ` +
          `${count(exporter.spans)} spans recorded`,
      );
      return [
        {
          figure: 'emit with OpenTelemetry on vs off',
          value: `${on.emitMs.toFixed(3)} vs ${off.emitMs.toFixed(3)} ms = ${times(on.emitMs / off.emitMs)}`,
          target: '≤ 1.2 ×',
        },
        {
          figure: 'no-op burn-down with OpenTelemetry on vs off',
          value: `${count(on.burnDown)} vs ${count(off.burnDown)} events/s = ${times(on.burnDown / off.burnDown)}`,
          target: '≥ 0.8 ×',
        },
      ];
    }),
};
