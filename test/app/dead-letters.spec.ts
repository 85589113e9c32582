import { DataSource } from 'typeorm';
import request from 'supertest';
import { outboxTestingOptions } from '@app/outbox/testing';
import { useReferenceApp, OPERATOR } from '../support/reference-app';
import { plantSecret } from '../support/log-guard';
import { bearer } from '../support/tenant';

/** The reference app's dead-letter endpoints over OutboxAdmin: reads, pages, and 400s. */

const t = useReferenceApp({}, { outbox: outboxTestingOptions });
const ids: string[] = [];

beforeAll(async () => {
  const http = request(t.app.getHttpServer());
  for (const name of ['Acme', 'Beta']) {
    const org = await http
      .post('/organizations')
      .set(OPERATOR)
      .send({ name, adminEmail: `admin@${name.toLowerCase()}.test` })
      .expect(201);
    ids.push(org.body.eventId as string);
  }
  // What a mail outage leaves behind: the mail handler failed for good, the others delivered.
  await t.app.get(DataSource).query(
    `UPDATE outbox_event
     SET dead_at = now(), attempts = 3, deliveries = '{"audit-log": "2026-01-01T00:00:00Z"}',
         failures = '{"notification-mail": {"count": 3, "retryAt": null}}',
         last_error = 'notification-mail: Error: SMTP 421 busy, queue ' || left(id::text, 4)
     WHERE id = ANY ($1::uuid[])`,
    [ids],
  );
});

it('lists dead letters newest first, filters them and pages with the next cursor', async () => {
  const http = request(t.app.getHttpServer());
  const all = await http.get('/outbox/dead-letters').set(OPERATOR).expect(200);
  expect(all.body.items.map((i: { id: string }) => i.id).sort()).toEqual([...ids].sort());
  expect(all.body.items[0]).toMatchObject({
    type: 'organization.created',
    state: 'dead',
    failedHandlers: [{ name: 'notification-mail', failures: 3, retryAt: null }],
    deliveredHandlers: ['audit-log'],
  });

  const first = await http.get('/outbox/dead-letters?limit=1').set(OPERATOR).expect(200);
  const second = await http
    .get('/outbox/dead-letters')
    .set(OPERATOR)
    .query({ limit: 1, after: first.body.next })
    .expect(200);
  expect([first.body.items[0].id, second.body.items[0].id]).toEqual(
    all.body.items.map((i: { id: string }) => i.id),
  );
  expect(second.body.next).toBeNull();

  const filtered = await http
    .get('/outbox/dead-letters')
    .set(OPERATOR)
    .query({ type: 'member.invited,invoice.paid', includeRetrying: 'true' })
    .expect(200);
  expect(filtered.body.items).toEqual([]);
});

it('groups one outage into one line and shows one event whole', async () => {
  const http = request(t.app.getHttpServer());
  const groups = await http.get('/outbox/dead-letters/groups').set(OPERATOR).expect(200);
  expect(groups.body).toMatchObject([
    { type: 'organization.created', handler: 'notification-mail', count: 2 },
  ]);
  const event = await http.get(`/outbox/events/${ids[0]}`).set(OPERATOR).expect(200);
  expect(event.body).toMatchObject({ id: ids[0], payload: { name: 'Acme' }, attempts: 3 });
  await http.get('/outbox/events/00000000-0000-4000-8000-000000000000').set(OPERATOR).expect(404);
});

it('answers bad input with a 400 naming the field, never a 500', async () => {
  const http = request(t.app.getHttpServer());
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
    const res = await http.get(url).set(OPERATOR);
    expect({ url, status: res.status }).toEqual({ url, status: 400 });
    expect(JSON.stringify(res.body.message)).toContain(message);
  }
});

it('replays and discards over HTTP: a dry run first, then the change, each answered with the ids', async () => {
  const http = request(t.app.getHttpServer());
  const [acme, beta] = ids;
  const dry = await http
    .post('/outbox/dead-letters/replay')
    .set(OPERATOR)
    .send({ filter: { types: ['organization.created'] }, dryRun: true })
    .expect(200);
  expect({ ...dry.body, ids: [...dry.body.ids].sort() }).toMatchObject({
    dryRun: true,
    count: 2,
    countsByType: { 'organization.created': 2 },
    ids: [...ids].sort(),
    unchanged: [],
    cursor: null,
  });

  const discarded = await http
    .post('/outbox/dead-letters/discard')
    .set(OPERATOR)
    .send({ ids: [beta], reason: 'test organization' })
    .expect(200);
  expect(discarded.body).toMatchObject({ dryRun: false, count: 1, ids: [beta], unchanged: [] });
  const listed = await http.get('/outbox/dead-letters').set(OPERATOR).expect(200);
  expect(listed.body.items.map((i: { id: string }) => i.id)).toEqual([acme]);
  const withDiscarded = await http
    .get('/outbox/dead-letters')
    .set(OPERATOR)
    .query({ includeDiscarded: 'true' })
    .expect(200);
  expect(withDiscarded.body.items).toEqual(
    expect.arrayContaining([
      expect.objectContaining({ id: beta, state: 'discarded', discardReason: 'test organization' }),
    ]),
  );

  const replayed = await http
    .post('/outbox/dead-letters/replay')
    .set(OPERATOR)
    .send({ ids: [acme], handlers: ['notification-mail'] })
    .expect(200);
  expect(replayed.body).toMatchObject({ dryRun: false, count: 1, ids: [acme], unchanged: [] });
  const [row] = await t.app
    .get(DataSource)
    .query<{ due: boolean }[]>(
      `SELECT next_attempt_at <= now() AS due FROM outbox_event WHERE id = $1`,
      [acme],
    );
  expect(row.due).toBe(true);
});

describe('without the operator token', () => {
  const WRONG = [
    {},
    { authorization: 'Bearer not-the-operator-token' },
    { authorization: `Basic ${Buffer.from('operator:x').toString('base64')}` },
  ];

  it.each(WRONG)('every read is a 401 with %j', async (headers) => {
    const http = request(t.app.getHttpServer());
    for (const url of [
      '/outbox',
      '/outbox/dead-letters',
      '/outbox/dead-letters/groups',
      `/outbox/events/${ids[0]}`,
      '/metrics',
      '/audit/verify',
    ]) {
      const res = await http.get(url).set(headers);
      expect({ url, status: res.status }).toEqual({ url, status: 401 });
      expect(JSON.stringify(res.body)).not.toContain(ids[0]);
    }
  });

  it.each(WRONG)(
    'a replay, a discard or a new organization is a 401 with %j, and changes nothing',
    async (headers) => {
      const http = request(t.app.getHttpServer());
      const snapshot = () =>
        t.app
          .get(DataSource)
          .query(`SELECT id, next_attempt_at, discarded_at, dead_at FROM outbox_event ORDER BY id`);
      const before = await snapshot();
      const organizations = await t.app.get(DataSource).query(`SELECT id FROM organization`);
      for (const [url, body] of [
        ['/outbox/dead-letters/replay', { filter: { types: ['organization.created'] }, all: true }],
        ['/outbox/dead-letters/discard', { ids, reason: 'forged' }],
        ['/organizations', { name: 'Forged', adminEmail: 'x@forged.test' }],
        [`/organizations/${ids[0]}/api-key`, {}],
      ] as const) {
        const res = await http.post(url).set(headers).send(body);
        expect({ url, status: res.status }).toEqual({ url, status: 401 });
      }
      expect(await snapshot()).toEqual(before);
      expect(await t.app.get(DataSource).query(`SELECT id FROM organization`)).toEqual(
        organizations,
      );
    },
  );

  it("an organization's API key is not the operator token", async () => {
    const http = request(t.app.getHttpServer());
    const org = await http
      .post('/organizations')
      .set(OPERATOR)
      .send({ name: 'Tenant', adminEmail: 'admin@tenant.test' })
      .expect(201);
    plantSecret(org.body.apiKey);
    await http.get('/outbox/dead-letters').set(bearer(org.body.apiKey)).expect(401);
    await http
      .post('/outbox/dead-letters/replay')
      .set(bearer(org.body.apiKey))
      .send({ ids })
      .expect(401);
  });
});

it('answers a bad replay or discard with a 400 naming the field, and changes nothing', async () => {
  const http = request(t.app.getHttpServer());
  const before = await t.app
    .get(DataSource)
    .query(`SELECT id, next_attempt_at, discarded_at FROM outbox_event ORDER BY id`);
  const cases: [string, object, string][] = [
    ['/outbox/dead-letters/replay', {}, 'selector must be { ids } or { filter }'],
    [
      '/outbox/dead-letters/replay',
      { filter: {} },
      'selector.filter must be a filter with at least one condition',
    ],
    ['/outbox/dead-letters/replay', { ids: ['42'] }, 'each value in ids must be a UUID'],
    [
      '/outbox/dead-letters/replay',
      { ids: [ids[0]], handlers: [] },
      'handlers should not be empty',
    ],
    ['/outbox/dead-letters/replay', { filter: { types: 'x' } }, 'filter.types must be an array'],
    [
      '/outbox/dead-letters/replay',
      { filter: { deadAfter: 'soon' } },
      'filter.deadAfter must be a Date instance',
    ],
    [
      '/outbox/dead-letters/replay',
      { filter: { color: 'red' } },
      'filter.property color should not exist',
    ],
    [
      '/outbox/dead-letters/replay',
      { filter: { types: ['organization.created'] }, after: 'not-a-cursor' },
      'options.after must be the `cursor` of a previous replay or discard by filter',
    ],
    ['/outbox/dead-letters/discard', { ids: [ids[0]] }, 'reason must be a string'],
    [
      '/outbox/dead-letters/discard',
      { ids: [ids[0]], reason: ' ' },
      'options.reason must be a non-blank string',
    ],
  ];
  for (const [url, body, message] of cases) {
    const res = await http.post(url).set(OPERATOR).send(body);
    expect({ url, body, status: res.status }).toEqual({ url, body, status: 400 });
    expect(JSON.stringify(res.body.message)).toContain(message);
  }
  const after = await t.app
    .get(DataSource)
    .query(`SELECT id, next_attempt_at, discarded_at FROM outbox_event ORDER BY id`);
  expect(after).toEqual(before);
});

it('answers a change by filter while another runs with a 409 naming it, and changes nothing', async () => {
  const dataSource = t.app.get(DataSource);
  await dataSource.query(
    `INSERT INTO outbox_admin_change (scope, change_id, kind, actor, selection, expires_at)
     VALUES ('dead-letters', gen_random_uuid(), 'discard', 'cli:ops', '{}',
             now() + interval '1 minute')`,
  );
  try {
    const before = await dataSource.query(
      `SELECT id, next_attempt_at, discarded_at FROM outbox_event ORDER BY id`,
    );
    const res = await request(t.app.getHttpServer())
      .post('/outbox/dead-letters/replay')
      .set(OPERATOR)
      .send({ filter: { types: ['organization.created'] } })
      .expect(409);
    expect(res.body.message).toContain('a discard by filter by cli:ops');
    expect(
      await dataSource.query(
        `SELECT id, next_attempt_at, discarded_at FROM outbox_event ORDER BY id`,
      ),
    ).toEqual(before);
  } finally {
    await dataSource.query('TRUNCATE outbox_admin_change');
  }
});
