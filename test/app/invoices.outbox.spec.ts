import { DataSource } from 'typeorm';
import request from 'supertest';
import { drainUntilIdle, emitted, expectEmitted, outboxTestingOptions } from '@app/outbox/testing';
import { useReferenceApp } from '../support/reference-app';
import { createTenant } from '../support/tenant';

/**
 * The reference app tested as the package README shows: the outbox runs without its loop,
 * LISTEN connection or timers; the test asserts what was emitted, then delivers it.
 */

const t = useReferenceApp({}, { outbox: outboxTestingOptions });
let dataSource: DataSource;

beforeAll(() => {
  dataSource = t.app.get(DataSource);
});

it('paying an invoice emits invoice.paid, and the audit log records it once delivered', async () => {
  const http = request(t.app.getHttpServer());
  const org = await createTenant(t.app.getHttpServer(), 'Acme', 'ada@acme.test');
  const invoice = await http
    .post(`/organizations/${org.id}/invoices`)
    .set(org.auth)
    .send({ number: 'INV-1', amountCents: 1200, currency: 'EUR' })
    .expect(201);
  await http
    .post(`/organizations/${org.id}/invoices/${invoice.body.id}/pay`)
    .set(org.auth)
    .expect(201);

  const paid = await expectEmitted(dataSource, {
    type: 'invoice.paid',
    aggregateId: invoice.body.id,
    payload: { number: 'INV-1', amountCents: 1200 },
  });
  expect(paid.deliveredTo).toEqual([]);

  await drainUntilIdle(t.app);

  const [delivered] = await emitted(dataSource, { ids: [paid.id] });
  expect(delivered.deliveredTo).toContain('audit-log');
  const audited = await dataSource.query('SELECT event_type FROM audit_entry WHERE event_id = $1', [
    paid.id,
  ]);
  expect(audited).toEqual([{ event_type: 'invoice.paid' }]);
});
