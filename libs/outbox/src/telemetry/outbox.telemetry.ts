import type * as Otel from '@opentelemetry/api';
import type { OutboxEvent } from '../outbox-event.types';
import type { PendingState } from '../store/lease/lease.types';
import type { OutboxResult } from '../store/outbox.result';
import { loadOptionalPackage } from '../common/optional-package.util';

/** How a handler run ended, as counted here (a `HandlerOutcome`). */
type RunEnd = { ok: true } | { ok: false; error: unknown; timedOut: boolean };

/** The instrumentation scope: the package's name. */
export const OUTBOX_INSTRUMENTATION = 'nestjs-lease-outbox';

/** `messaging.system` of every span and metric. */
const MESSAGING_SYSTEM = 'outbox';

/** Seconds, as OpenTelemetry's duration conventions want. */
const seconds = (ms: number) => ms / 1000;

/** Histogram bounds for durations in seconds, from 5 ms to 10 min. */
const DURATION_BOUNDS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
];

/** One handler run as the telemetry sees it: its span, and its end. */
export interface HandlerRunTelemetry {
  /** Runs `fn` with the run's span as the active one, so the handler's own spans nest in it. */
  within<T>(fn: () => T): T;
  end(outcome: RunEnd): void;
}

const NO_RUN: HandlerRunTelemetry = { within: (fn) => fn(), end: () => undefined };

/** Each settle statement's kind, as the settle-duration metric names it. */
const SETTLE_KINDS = {
  delivered: 'delivered',
  failed: 'failed',
  release: 'released',
  held: 'parked',
  limited: 'held_by_limit',
} as const;

/**
 * Metrics and traces through the OpenTelemetry API, when the app has `@opentelemetry/api`
 * installed: the library never starts an SDK, so everything here costs a no-op call until the app
 * registers a MeterProvider, a TracerProvider or a propagator. Names and attributes follow the
 * OpenTelemetry messaging conventions where one fits (`messaging.process.duration`, consumer
 * spans named `process <event type>`, the handler as `messaging.consumer.group.name`); the rest
 * are `outbox.*`. No payload, and no error text, reaches an attribute: a failure is its error
 * class name (`error.type`).
 */
export class OutboxTelemetry {
  private readonly api: typeof Otel | undefined;
  private readonly instruments: ReturnType<typeof createInstruments> | undefined;
  private readonly tracer: Otel.Tracer | undefined;
  private stateSource: (() => Promise<OutboxResult<PendingState>>) | undefined;
  private readonly meter: Otel.Meter | undefined;
  /** No MeterProvider was registered when the instruments were made: they stay no-ops. */
  private readonly meterIsNoop: boolean = true;
  private unobserve: (() => void) | undefined;

  /**
   * `api` is the `@opentelemetry/api` module (typed loosely so that the declarations never name a
   * package the app may not have); found on its own when absent.
   */
  constructor(otelApi: unknown = loadOptionalPackage('@opentelemetry/api')) {
    const api = otelApi as typeof Otel | undefined;
    this.api = api;
    if (!api) return;
    const meter = api.metrics.getMeter(OUTBOX_INSTRUMENTATION);
    const instruments = createInstruments(meter);
    this.instruments = instruments;
    this.tracer = api.trace.getTracer(OUTBOX_INSTRUMENTATION);
    this.meter = meter;
    this.meterIsNoop = meter instanceof api.createNoopMeter().constructor;
  }

  /** The app is closing: its gauges stop reading a DataSource that is going away. */
  onApplicationShutdown(): void {
    this.stateSource = undefined;
    this.unobserve?.();
    this.unobserve = undefined;
  }

  /**
   * Where the state gauges read from when a MeterProvider collects: the bounded state probe
   * (the health check's), so a scrape costs the same at any backlog.
   */
  observeStateFrom(read: () => Promise<OutboxResult<PendingState>>): void {
    this.stateSource = read;
    const { meter, instruments } = this;
    if (!meter || !instruments || this.unobserve) return;
    const gauges = [
      instruments.due,
      instruments.retrying,
      instruments.inFlight,
      instruments.overdue,
      instruments.dead,
      instruments.blockedKeys,
      instruments.orderedWait,
      instruments.oldestDueWait,
      instruments.horizonHeld,
      instruments.deadTuples,
    ];
    const callback = (observer: Otel.BatchObservableResult) => this.observeState(observer);
    meter.addBatchObservableCallback(callback, gauges);
    this.unobserve = () => meter.removeBatchObservableCallback(callback, gauges);
  }

  /**
   * The events with the active trace context added to their metadata, inside a PRODUCER span
   * (`send <type>`) that ends when `write` settles; the events as given when no propagator is
   * registered. Metadata the caller set wins.
   */
  async emitting<E extends { type: string; metadata?: Record<string, unknown> }, R>(
    events: readonly E[],
    write: (events: readonly E[]) => Promise<R>,
  ): Promise<R> {
    const api = this.api;
    if (!api || !this.tracer || api.propagation.fields().length === 0) return write(events);
    const types = [...new Set(events.map((e) => e.type))];
    const span = this.tracer.startSpan(`send ${types.length === 1 ? types[0] : 'outbox'}`, {
      kind: api.SpanKind.PRODUCER,
      attributes: {
        'messaging.system': MESSAGING_SYSTEM,
        'messaging.operation.name': 'send',
        'messaging.operation.type': 'send',
        'messaging.destination.name': types.join(','),
        'messaging.batch.message_count': events.length,
      },
    });
    const injected: Record<string, string> = {};
    api.propagation.inject(api.trace.setSpan(api.context.active(), span), injected);
    // The trace, not the caller's baggage: baggage comes from the client's headers, and would be
    // stored in every event and passed on by its handlers.
    const carrier: Record<string, string> = {};
    for (const key of ['traceparent', 'tracestate']) {
      if (injected[key] !== undefined) carrier[key] = injected[key];
    }
    const traced = events.map((e) => ({ ...e, metadata: { ...carrier, ...e.metadata } }));
    try {
      return await write(traced);
    } catch (error) {
      span.setStatus({ code: api.SpanStatusCode.ERROR });
      span.setAttribute('error.type', errorType(error));
      throw error;
    } finally {
      span.end();
    }
  }

  /**
   * One handler run: a CONSUMER span `process <type>` whose parent (and link) is the trace
   * context stored at emit, the run's duration, its outcome counted, and (on the handler's first
   * try) the lag from the emit to the start.
   */
  handlerRun(event: OutboxEvent, handler: string, handlerAttempt: number): HandlerRunTelemetry {
    const api = this.api;
    const instruments = this.instruments;
    if (!api || !instruments || !this.tracer || this.runsUnobserved(api)) return NO_RUN;
    const attributes: Otel.Attributes = {
      'messaging.system': MESSAGING_SYSTEM,
      'messaging.operation.name': 'process',
      'messaging.destination.name': event.type,
      'messaging.consumer.group.name': handler,
    };
    const startedAt = performance.now();
    if (handlerAttempt === 1) {
      instruments.eventLag.record(seconds(Math.max(0, Date.now() - event.occurredAt.getTime())), {
        'messaging.destination.name': event.type,
        'messaging.consumer.group.name': handler,
      });
    }
    const parent = api.propagation.extract(api.ROOT_CONTEXT, event.metadata ?? {});
    const emitted = api.trace.getSpanContext(parent);
    // Every key written out rather than spread from `attributes`: a spread followed by more keys
    // builds the object through V8's slow path, on every handler run.
    const span = this.tracer.startSpan(
      `process ${event.type}`,
      {
        kind: api.SpanKind.CONSUMER,
        links: emitted ? [{ context: emitted }] : [],
        attributes: {
          'messaging.system': MESSAGING_SYSTEM,
          'messaging.operation.name': 'process',
          'messaging.destination.name': event.type,
          'messaging.consumer.group.name': handler,
          'messaging.operation.type': 'process',
          'messaging.message.id': event.id,
          'outbox.handler.attempt': handlerAttempt,
        },
      },
      parent,
    );
    const active = api.trace.setSpan(parent, span);
    return {
      within: (fn) => api.context.with(active, fn),
      end: (outcome) => {
        const failed = outcome.ok ? undefined : errorType(outcome.error, outcome.timedOut);
        const tagged = failed ? { ...attributes, 'error.type': failed } : attributes;
        instruments.processDuration.record(seconds(performance.now() - startedAt), tagged);
        (failed ? instruments.failed : instruments.delivered).add(1, tagged);
        if (failed) {
          span.setStatus({ code: api.SpanStatusCode.ERROR });
          span.setAttribute('error.type', failed);
        }
        span.end();
      },
    };
  }

  /**
   * Whether a handler run has nothing to feed: no meter, no tracer and no propagator registered.
   * Asked on every run, since a TracerProvider and a propagator may be registered after boot; the
   * span, context and attributes a run would build cost a tenth of the engine's time per event.
   */
  private runsUnobserved(api: typeof Otel): boolean {
    if (!this.meterIsNoop || api.propagation.fields().length > 0) return false;
    const provider = api.trace.getTracerProvider();
    return (
      provider instanceof api.ProxyTracerProvider &&
      provider.getDelegateTracer(OUTBOX_INSTRUMENTATION) === undefined
    );
  }

  /** A run of `handler` held back by its limit (`maxConcurrent`, `rate`): it did not start. */
  handlerHeld(handler: string): void {
    this.instruments?.held.add(1, {
      'messaging.system': MESSAGING_SYSTEM,
      'messaging.consumer.group.name': handler,
    });
  }

  /** Events leased by one claim. */
  claimed(count: number): void {
    this.instruments?.claimSize.record(count);
  }

  /** One settle statement and how long it took. */
  settled(kind: keyof typeof SETTLE_KINDS, ms: number, ok: boolean): void {
    this.instruments?.settleDuration.record(seconds(ms), {
      'outbox.settle.kind': SETTLE_KINDS[kind],
      ...(ok ? {} : { 'error.type': 'store' }),
    });
  }

  /** Events that became dead, by type. */
  dead(types: readonly string[]): void {
    for (const type of types) this.instruments?.deadEvents.add(1, destination(type));
  }

  /** Events an operator replayed or discarded, by type. */
  changed(kind: 'replay' | 'discard', types: readonly string[]): void {
    const counter = kind === 'replay' ? this.instruments?.replayed : this.instruments?.discarded;
    for (const type of types) counter?.add(1, destination(type));
  }

  listenerReconnected(): void {
    this.instruments?.reconnects.add(1);
  }

  private async observeState(observer: Otel.BatchObservableResult): Promise<void> {
    const instruments = this.instruments;
    if (!this.stateSource || !instruments) return;
    const result = await this.stateSource();
    // A failed probe reports nothing rather than zeros that would read as "all clear".
    if (!result.ok) return;
    const state = result.value;
    observer.observe(instruments.due, state.due);
    observer.observe(instruments.retrying, state.retrying);
    observer.observe(instruments.inFlight, state.inFlight);
    observer.observe(instruments.overdue, state.expiredLeases);
    observer.observe(instruments.dead, state.dead);
    observer.observe(instruments.blockedKeys, state.blockedKeys);
    observer.observe(instruments.orderedWait, seconds(state.orderedWaitMs ?? 0));
    observer.observe(instruments.oldestDueWait, seconds(state.oldestDueWaitMs ?? 0));
    observer.observe(instruments.horizonHeld, seconds(state.horizon.heldMs ?? 0));
    observer.observe(instruments.deadTuples, state.horizon.deadTuples);
  }
}

function destination(type: string): Otel.Attributes {
  return { 'messaging.system': MESSAGING_SYSTEM, 'messaging.destination.name': type };
}

/** A failure's kind, never its text: `timeout`, or the error's class name. */
function errorType(error: unknown, timedOut = false): string {
  if (timedOut) return 'timeout';
  return error instanceof Error ? error.constructor.name || 'Error' : '_OTHER';
}

function createInstruments(meter: Otel.Meter) {
  const duration = { unit: 's', advice: { explicitBucketBoundaries: DURATION_BOUNDS } };
  return {
    processDuration: meter.createHistogram('messaging.process.duration', {
      description: 'Duration of one handler run on one event.',
      ...duration,
    }),
    eventLag: meter.createHistogram('outbox.event.lag', {
      description: "From an event's emit to the start of a handler's first run on it.",
      ...duration,
    }),
    delivered: meter.createCounter('outbox.handler.delivered', {
      description: 'Handler runs that succeeded.',
      unit: '{run}',
    }),
    failed: meter.createCounter('outbox.handler.failed', {
      description: 'Handler runs that failed or ran out of time.',
      unit: '{run}',
    }),
    held: meter.createCounter('outbox.handler.held', {
      description: 'Handler runs held back by their limit (maxConcurrent, rate): not started.',
      unit: '{run}',
    }),
    deadEvents: meter.createCounter('outbox.event.dead', {
      description: 'Events that became dead (announced once).',
      unit: '{event}',
    }),
    replayed: meter.createCounter('outbox.event.replayed', {
      description: 'Dead events replayed by an operator.',
      unit: '{event}',
    }),
    discarded: meter.createCounter('outbox.event.discarded', {
      description: 'Events discarded by an operator.',
      unit: '{event}',
    }),
    claimSize: meter.createHistogram('outbox.claim.size', {
      description: 'Events leased by one claim.',
      unit: '{event}',
      advice: { explicitBucketBoundaries: [0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] },
    }),
    settleDuration: meter.createHistogram('outbox.settle.duration', {
      description: 'Duration of one settle statement (a batch of events).',
      ...duration,
    }),
    reconnects: meter.createCounter('outbox.listener.reconnects', {
      description: 'Reconnections of the LISTEN connection.',
      unit: '{reconnect}',
    }),
    due: meter.createObservableGauge('outbox.events.due', {
      description: 'Live events claimable now (a bounded count: at most 1000).',
      unit: '{event}',
    }),
    retrying: meter.createObservableGauge('outbox.events.retrying', {
      description: 'Live events resting until their next attempt (bounded count).',
      unit: '{event}',
    }),
    inFlight: meter.createObservableGauge('outbox.events.in_flight', {
      description: 'Live events under a lease (bounded count).',
      unit: '{event}',
    }),
    overdue: meter.createObservableGauge('outbox.events.overdue', {
      description: 'Leases that ended without a settle: a relay died or stalled (bounded count).',
      unit: '{event}',
    }),
    dead: meter.createObservableGauge('outbox.events.dead', {
      description: 'Dead events not discarded (bounded count).',
      unit: '{event}',
    }),
    blockedKeys: meter.createObservableGauge('outbox.ordering.blocked_keys', {
      description: 'Keys an ordered handler cannot go on with: their head is dead (bounded count).',
      unit: '{key}',
    }),
    orderedWait: meter.createObservableGauge('outbox.ordering.wait', {
      description:
        'How long the oldest event holding its key for a retrying ordered handler has waited.',
      unit: 's',
    }),
    oldestDueWait: meter.createObservableGauge('outbox.lag', {
      description: 'How long the oldest due event has waited.',
      unit: 's',
    }),
    horizonHeld: meter.createObservableGauge('outbox.db.xmin_horizon.age', {
      description:
        "How long the oldest transaction holding the database's xmin horizon has been open.",
      unit: 's',
    }),
    deadTuples: meter.createObservableGauge('outbox.db.dead_tuples', {
      description: 'Dead tuples of the outbox table, as PostgreSQL last counted them.',
      unit: '{tuple}',
    }),
  };
}
