import { Injectable } from '@nestjs/common';
import { context, metrics, propagation, trace, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  MeterProvider,
  MetricReader,
  type DataPoint,
  type Histogram,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  OutboxAdmin,
  OutboxEngine,
  OutboxPublisher,
  type NewOutboxEvent,
} from '@app/outbox';
import { drainUntilIdle, outboxTestingOptions } from '@app/outbox/testing';
import { createOutboxApp, emitCommitted, eventually, useOutboxApp } from './support/outbox-app';

/**
 * Metrics and traces through the OpenTelemetry API, read by the real SDK: a MeterProvider with
 * a reader collected on demand, a tracer provider with an in-memory exporter, the W3C propagator
 * and AsyncLocalStorage context, registered the way an app's telemetry setup registers them.
 */

class CollectingReader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

const reader = new CollectingReader();
const meterProvider = new MeterProvider({ readers: [reader] });
const spans = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({
  spanProcessors: [new SimpleSpanProcessor(spans)],
});
// Before the app exists: the library takes its meter when its module is built.
metrics.setGlobalMeterProvider(meterProvider);
trace.setGlobalTracerProvider(tracerProvider);
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
propagation.setGlobalPropagator(new W3CTraceContextPropagator());

const tracer = trace.getTracer('app');
const down = new Set<string>();

@Injectable()
class Handlers {
  @OnOutboxEvent('ledger', { events: ['invoice.paid'] })
  async ledger() {
    // The handler's own work, in the run's span.
    await tracer.startActiveSpan('ledger.write', async (span) => {
      await Promise.resolve();
      span.end();
    });
  }

  @OnOutboxEvent('webhook', { events: ['invoice.paid'] })
  webhook() {
    if (down.has('webhook')) throw new TypeError('receiver said unavailable');
  }

  @OnOutboxEvent('journal', { events: ['invoice.journaled'], ordered: true })
  journal() {
    if (down.has('journal')) throw new TypeError('journal refused');
  }
}

const t = useOutboxApp(
  { outbox: outboxTestingOptions({ maxAttempts: 1 }), providers: [Handlers] },
  { truncateEach: ['outbox_event'] },
);

afterAll(async () => {
  await meterProvider.shutdown();
  await tracerProvider.shutdown();
});

beforeEach(() => {
  down.clear();
  spans.reset();
});

const paid = (n: number, id?: string): NewOutboxEvent => ({
  id,
  type: 'invoice.paid',
  aggregateType: 'invoice',
  aggregateId: `inv-${n}`,
  payload: { n, card: 'secret-4242' },
});

/** Emits inside a span standing for the HTTP request that emits, as an instrumented app has. */
async function emitInRequest(
  events: NewOutboxEvent[],
): Promise<{ ids: string[]; traceId: string }> {
  return tracer.startActiveSpan(
    'POST /invoices/:id/pay',
    { kind: SpanKind.SERVER },
    async (span) => {
      try {
        const ids = await emitCommitted(t.app, events);
        return { ids, traceId: span.spanContext().traceId };
      } finally {
        span.end();
      }
    },
  );
}

const named = (name: string) => spans.getFinishedSpans().filter((s) => s.name === name);
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

async function collect(): Promise<MetricData[]> {
  const { resourceMetrics, errors } = await reader.collect();
  expect(errors).toEqual([]);
  return resourceMetrics.scopeMetrics
    .filter((s) => s.scope.name === 'nestjs-lease-outbox')
    .flatMap((s) => s.metrics);
}

function points(all: MetricData[], name: string): DataPoint<number | Histogram>[] {
  return (all.find((m) => m.descriptor.name === name)?.dataPoints ?? []) as DataPoint<
    number | Histogram
  >[];
}

function sum(all: MetricData[], name: string, attributes: Record<string, unknown> = {}): number {
  return points(all, name)
    .filter((p) => Object.entries(attributes).every(([k, v]) => p.attributes[k] === v))
    .reduce((total, p) => total + (typeof p.value === 'number' ? p.value : p.value.count), 0);
}

describe('traces', () => {
  it('stores the trace context at emit and runs each handler in a consumer span of that trace', async () => {
    down.add('webhook');
    const { ids, traceId } = await emitInRequest([paid(1)]);
    const [request] = named('POST /invoices/:id/pay');
    const [send] = named('send invoice.paid');
    expect(send).toMatchObject({ kind: SpanKind.PRODUCER });
    expect(send.spanContext().traceId).toBe(traceId);
    expect(parentOf(send)).toBe(request.spanContext().spanId);
    expect(send.attributes).toMatchObject({
      'messaging.system': 'outbox',
      'messaging.operation.name': 'send',
      'messaging.destination.name': 'invoice.paid',
      'messaging.batch.message_count': 1,
    });
    const [{ metadata }] = await t.db.dataSource.query<{ metadata: Record<string, string> }[]>(
      'SELECT metadata FROM outbox_event WHERE id = $1',
      [ids[0]],
    );
    expect(metadata.traceparent).toBe(`00-${traceId}-${send.spanContext().spanId}-01`);

    await drainUntilIdle(t.app);
    const runs = named('process invoice.paid');
    expect(runs.map((s) => s.attributes['messaging.consumer.group.name']).sort()).toEqual([
      'ledger',
      'webhook',
    ]);
    for (const run of runs) {
      expect(run.kind).toBe(SpanKind.CONSUMER);
      expect(run.spanContext().traceId).toBe(traceId);
      expect(parentOf(run)).toBe(send.spanContext().spanId);
      expect(run.links.map((l) => l.context.spanId)).toEqual([send.spanContext().spanId]);
      expect(run.attributes).toMatchObject({
        'messaging.operation.name': 'process',
        'messaging.message.id': ids[0],
        'outbox.handler.attempt': 1,
      });
    }
    const ledger = runs.find((s) => s.attributes['messaging.consumer.group.name'] === 'ledger')!;
    const webhook = runs.find((s) => s.attributes['messaging.consumer.group.name'] === 'webhook')!;
    expect(parentOf(named('ledger.write')[0])).toBe(ledger.spanContext().spanId);
    expect(webhook.status.code).toBe(SpanStatusCode.ERROR);
    expect(webhook.attributes['error.type']).toBe('TypeError');
    // No payload and no error text in any attribute. (The markers are words, not digits: a
    // digit string can occur in a random message id.)
    expect(JSON.stringify(spans.getFinishedSpans().map((s) => s.attributes))).not.toMatch(
      /secret-4242|unavailable/,
    );
  });

  it('takes an event emitted again under another trace as the same event, not a conflict', async () => {
    const id = '0190a0a0-0000-7000-8000-0000000000aa';
    await emitInRequest([paid(2, id)]);
    const again = await tracer.startActiveSpan('retried request', (span) =>
      t.app
        .get(DataSource)
        .transaction((manager) =>
          t.app.get(OutboxPublisher).emit(paid(2, id), { manager, returning: 'result' }),
        )
        .finally(() => span.end()),
    );
    expect(again).toEqual({ id, duplicate: true });
  });
});

describe('metrics', () => {
  it('counts runs, deaths and replays by handler and type, and times runs, lag, claims and settles', async () => {
    const before = await collect();
    down.add('webhook');
    await emitInRequest([paid(3), paid(4)]);
    await drainUntilIdle(t.app);
    const after = await collect();
    const delta = (name: string, attributes: Record<string, unknown> = {}) =>
      sum(after, name, attributes) - sum(before, name, attributes);

    const ledger = {
      'messaging.destination.name': 'invoice.paid',
      'messaging.consumer.group.name': 'ledger',
    };
    const webhook = {
      'messaging.destination.name': 'invoice.paid',
      'messaging.consumer.group.name': 'webhook',
    };
    expect(delta('outbox.handler.delivered', ledger)).toBe(2);
    expect(delta('outbox.handler.failed', { ...webhook, 'error.type': 'TypeError' })).toBe(2);
    expect(delta('messaging.process.duration', ledger)).toBe(2);
    expect(delta('messaging.process.duration', webhook)).toBe(2);
    expect(delta('outbox.event.lag', ledger)).toBe(2);
    expect(delta('outbox.event.dead', { 'messaging.destination.name': 'invoice.paid' })).toBe(2);
    expect(delta('outbox.claim.size')).toBeGreaterThanOrEqual(1);
    expect(
      delta('outbox.settle.duration', { 'outbox.settle.kind': 'failed' }),
    ).toBeGreaterThanOrEqual(1);
    const duration = points(after, 'messaging.process.duration')[0];
    expect(
      after.find((m) => m.descriptor.name === 'messaging.process.duration')!.descriptor.unit,
    ).toBe('s');
    expect((duration.value as Histogram).sum).toBeGreaterThanOrEqual(0);

    // The state gauges read the bounded probe at collection.
    expect(sum(after, 'outbox.events.dead')).toBe(2);
    expect(sum(after, 'outbox.events.due')).toBe(0);
    await emitInRequest([paid(5)]);
    expect(sum(await collect(), 'outbox.events.due')).toBe(1);

    down.clear();
    await t.app.get(OutboxAdmin).replay({ filter: { types: ['invoice.paid'] } });
    const replayed = await collect();
    expect(
      sum(replayed, 'outbox.event.replayed', { 'messaging.destination.name': 'invoice.paid' }) -
        sum(after, 'outbox.event.replayed', { 'messaging.destination.name': 'invoice.paid' }),
    ).toBe(2);
  });
});

describe('listener reconnects', () => {
  it('counts a reconnection of the LISTEN connection', async () => {
    const listening = await createOutboxApp({
      url: t.db.url,
      outbox: {
        listen: { reconnectMinMs: 50, reconnectMaxMs: 200 },
        tuning: { pollIntervalMs: 60_000 },
      },
      providers: [],
    });
    try {
      const engine = listening.get(OutboxEngine);
      await eventually('listening', () => engine.listenerState === 'listening');
      const before = sum(await collect(), 'outbox.listener.reconnects');
      const terminated = await t.db.dataSource.query<{ done: boolean }[]>(
        `SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity
         WHERE application_name = 'outbox-listener' AND datname = current_database()`,
      );
      expect(terminated).toEqual([{ done: true }]);
      await eventually(
        'the reconnect counted',
        async () => sum(await collect(), 'outbox.listener.reconnects') === before + 1,
      );
      expect(engine.listenerState).toBe('listening');
    } finally {
      await listening.close();
    }
  });

  it("gauges the keys an ordered handler is blocked on, and how long a retrying key's head has waited", async () => {
    down.add('journal');
    const journaled = (n: number): NewOutboxEvent => ({
      type: 'invoice.journaled',
      aggregateType: 'invoice',
      aggregateId: 'inv-1',
      payload: { n },
    });
    await emitInRequest([journaled(1), journaled(2)]);
    await drainUntilIdle(t.app);
    const blocked = await collect();
    expect(sum(blocked, 'outbox.ordering.blocked_keys')).toBe(1);
    expect(sum(blocked, 'outbox.ordering.wait')).toBe(0);
    expect(blocked.find((m) => m.descriptor.name === 'outbox.ordering.wait')!.descriptor.unit).toBe(
      's',
    );
  });
});
