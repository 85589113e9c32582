import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import request from 'supertest';
import { outboxTestingOptions } from '@app/outbox/testing';
import { createReferenceApp } from '../support/reference-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

/** The reference app's dead-letter endpoints over OutboxAdmin: reads, pages, and 400s. */

let db: TestDatabase;
let app: INestApplication;
const ids: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  app = await createReferenceApp(db.url, {}, { outbox: outboxTestingOptions });
  const http = request(app.getHttpServer());
  for (const name of ['Acme', 'Beta']) {
    const org = await http
      .post('/organizations')
      .send({ name, adminEmail: `admin@${name.toLowerCase()}.test` })
      .expect(201);
    ids.push(org.body.eventId as string);
  }
  // What a mail outage leaves behind: the mail handler failed for good, the others delivered.
  await app.get(DataSource).query(
    `UPDATE outbox_event
     SET dead_at = now(), attempts = 3, deliveries = '{"audit-log": "2026-01-01T00:00:00Z"}',
         failures = '{"notification-mail": {"count": 3, "retryAt": null}}',
         last_error = 'notification-mail: Error: SMTP 421 busy, queue ' || left(id::text, 4)
     WHERE id = ANY ($1::uuid[])`,
    [ids],
  );
});

afterAll(async () => {
  await app?.close();
  await db?.close();
});

it('lists dead letters newest first, filters them and pages with the next cursor', async () => {
  const http = request(app.getHttpServer());
  const all = await http.get('/outbox/dead-letters').expect(200);
  expect(all.body.items.map((i: { id: string }) => i.id).sort()).toEqual([...ids].sort());
  expect(all.body.items[0]).toMatchObject({
    type: 'organization.created',
    state: 'dead',
    failedHandlers: [{ name: 'notification-mail', failures: 3, retryAt: null }],
    deliveredHandlers: ['audit-log'],
  });

  const first = await http.get('/outbox/dead-letters?limit=1').expect(200);
  const second = await http
    .get('/outbox/dead-letters')
    .query({ limit: 1, after: first.body.next })
    .expect(200);
  expect([first.body.items[0].id, second.body.items[0].id]).toEqual(
    all.body.items.map((i: { id: string }) => i.id),
  );
  expect(second.body.next).toBeNull();

  const filtered = await http
    .get('/outbox/dead-letters')
    .query({ type: 'member.invited,invoice.paid', includeRetrying: 'true' })
    .expect(200);
  expect(filtered.body.items).toEqual([]);
});

it('groups one outage into one line and shows one event whole', async () => {
  const http = request(app.getHttpServer());
  const groups = await http.get('/outbox/dead-letters/groups').expect(200);
  expect(groups.body).toMatchObject([
    { type: 'organization.created', handler: 'notification-mail', count: 2 },
  ]);
  const event = await http.get(`/outbox/events/${ids[0]}`).expect(200);
  expect(event.body).toMatchObject({ id: ids[0], payload: { name: 'Acme' }, attempts: 3 });
  await http.get('/outbox/events/00000000-0000-4000-8000-000000000000').expect(404);
});

it('answers bad input with a 400 naming the field, never a 500', async () => {
  const http = request(app.getHttpServer());
  const cases: [string, string][] = [
    ['/outbox/dead-letters?limit=0', 'limit must not be less than 1'],
    ['/outbox/dead-letters?limit=many', 'limit must be an integer number'],
    ['/outbox/dead-letters?after=not-a-cursor', 'page.after must be a `next` cursor of list'],
    ['/outbox/dead-letters?deadAfter=yesterday', 'deadAfter must be a Date instance'],
    ['/outbox/dead-letters?includeRetrying=maybe', 'includeRetrying must be a boolean value'],
    ['/outbox/dead-letters/groups?type=', 'type must be longer than or equal to 1 characters'],
    ['/outbox/events/42', 'Validation failed (uuid is expected)'],
  ];
  for (const [url, message] of cases) {
    const res = await http.get(url);
    expect({ url, status: res.status }).toEqual({ url, status: 400 });
    expect(JSON.stringify(res.body.message)).toContain(message);
  }
});
