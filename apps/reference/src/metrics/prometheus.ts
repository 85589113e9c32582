import { metrics } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';

let exporter: PrometheusExporter | undefined;

/**
 * The app's OpenTelemetry MeterProvider, read by a Prometheus exporter that serves no port of its
 * own (`GET /metrics` of the app answers through it). Registered once per process, before the
 * outbox module is built: the library takes its meter from the global provider then.
 *
 * Why this exporter and not prom-client: the library reports through the OpenTelemetry API, so
 * an OpenTelemetry reader sees its metrics as they are (names, units, histogram bounds), and the
 * same provider can feed an OTLP collector instead by swapping the reader.
 */
export function prometheusExporter(): PrometheusExporter {
  if (exporter) return exporter;
  exporter = new PrometheusExporter({ preventServerStart: true });
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [exporter] }));
  return exporter;
}
