import request from 'supertest';
import { drainUntilIdle, outboxTestingOptions } from '@app/outbox/testing';
import { useReferenceApp, OPERATOR } from '../support/reference-app';

/** GET /metrics of the reference app: the outbox's OpenTelemetry metrics, as Prometheus reads them. */

const t = useReferenceApp({}, { outbox: outboxTestingOptions });

it('serves delivery counters, run durations, lag and the state gauges in the text format', async () => {
  const http = request(t.app.getHttpServer());
  await http
    .post('/organizations')
    .set(OPERATOR)
    .send({ name: 'Acme', adminEmail: 'admin@acme.test' })
    .expect(201);
  await drainUntilIdle(t.app);

  await http.get('/metrics').expect(401);
  const scrape = await http.get('/metrics').set(OPERATOR).expect(200);
  expect(scrape.headers['content-type']).toMatch(/^text\/plain/);
  const text = scrape.text;
  if (process.env.OUTBOX_PRINT_METRICS) console.log(text);
  expect(text).toMatch(
    /^outbox_handler_delivered_total\{[^}]*messaging_destination_name="organization\.created"[^}]*messaging_consumer_group_name="audit-log"[^}]*\} 1$/m,
  );
  expect(text).toMatch(
    /^messaging_process_duration_bucket\{[^}]*messaging_consumer_group_name="audit-log"[^}]*le="\+Inf"\} 1$/m,
  );
  expect(text).toMatch(/^outbox_event_lag_count\{[^}]*\} 1$/m);
  expect(text).toMatch(/^outbox_claim_size_bucket\{[^}]*le="\+Inf"\} [1-9]\d*$/m);
  expect(text).toMatch(/^outbox_events_due\{[^}]*\} 0$/m);
  expect(text).toMatch(/^outbox_events_dead\{[^}]*\} 0$/m);
});
