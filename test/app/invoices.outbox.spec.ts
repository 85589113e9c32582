import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import request from 'supertest';
import { drainUntilIdle, emitted, expectEmitted, outboxTestingOptions } from '@app/outbox/testing';
import { createReferenceApp } from '../support/reference-app';
import { createTenant } from '../support/tenant';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

/**
 * The reference app tested as the package README shows: the outbox runs without its loop,
 * LISTEN connection or timers; the test asserts what was emitted, then delivers it.
 */

let db: TestDatabase;
let app: INestApplication;
let dataSource: DataSource;

beforeAll(async () => {
  db = await createTestDatabase();
  app = await createReferenceApp(db.url, {}, { outbox: outboxTestingOptions });
  dataSource = app.get(DataSource);
});

afterAll(async () => {
  await app?.close();
  await db?.close();
});

it('paying an invoice emits invoice.paid, and the audit log records it once delivered', async () => {
  const http = request(app.getHttpServer());
  const org = await createTenant(app.getHttpServer(), 'Acme', 'ada@acme.test');
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

  await drainUntilIdle(app);

  const [delivered] = await emitted(dataSource, { ids: [paid.id] });
  expect(delivered.deliveredTo).toContain('audit-log');
  const audited = await dataSource.query('SELECT event_type FROM audit_entry WHERE event_id = $1', [
    paid.id,
  ]);
  expect(audited).toEqual([{ event_type: 'invoice.paid' }]);
});
