import * as otel from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { OutboxEvent } from '../outbox-event.types';
import { OutboxTelemetry } from './outbox.telemetry';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';

const event: OutboxEvent = {
  id: '0190f2a0-0000-7000-8000-000000000001',
  type: 'invoice.paid',
  aggregateType: 'invoice',
  aggregateId: '1',
  organizationId: null,
  requestId: null,
  payload: {},
  metadata: { traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-01` },
  occurredAt: new Date(),
  causationId: null,
  correlationId: null,
  orderingKey: 'invoice:1',
};

/** The trace id a handler sees as active while its run's `within` runs it. */
function traceSeenByHandler(telemetry: OutboxTelemetry): string | undefined {
  const run = telemetry.handlerRun(event, 'billing', 1);
  const seen = run.within(() => otel.trace.getSpanContext(otel.context.active())?.traceId);
  run.end({ ok: true });
  return seen;
}

describe('OutboxTelemetry, handler runs', () => {
  const contextManager = new AsyncLocalStorageContextManager().enable();
  beforeAll(() => otel.context.setGlobalContextManager(contextManager));
  afterAll(() => otel.context.disable());
  afterEach(() => otel.propagation.disable());

  it('runs a handler in the trace stored at emit once a propagator is registered', () => {
    otel.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    expect(traceSeenByHandler(new OutboxTelemetry(otel))).toBe(TRACE_ID);
  });

  it('builds nothing for a run when no meter, tracer or propagator is registered', () => {
    // Without the short cut the run still makes its (non-recording) span and activates it.
    expect(traceSeenByHandler(new OutboxTelemetry(otel))).toBeUndefined();
  });
});
