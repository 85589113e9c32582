import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { eventually } from '../support/outbox-app';
import { forceRedelivery, waitUntilDelivered } from '../support/redelivery';
import { OPERATOR, useReferenceApp } from '../support/reference-app';
import { WebhookReceiver } from '../support/webhook-receiver';
import { capturedLineCount, leakedLines, plantSecret } from '../support/log-guard';
import { webhookDeliveries } from '../support/webhook-deliveries';
import { createTenant } from '../support/tenant';

/**
 * Webhooks end to end: domain actions over HTTP, the transactional `webhook-fanout` handler
 * emitting one `webhook.delivery` outbox event per endpoint, the `webhook-sender` handler POSTing
 * each, and a real HTTP receiver on 127.0.0.1 that verifies every signature.
 */

const MAX_ATTEMPTS = 3;
const TIMEOUT_MS = 1500;
/** Two retries of 50 ms: three tries in all. */
const SCHEDULE = '50,50';

let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await WebhookReceiver.start();
});

const t = useReferenceApp({
  // The receiver listens on 127.0.0.1.
  WEBHOOK_ALLOW_PRIVATE_ADDRESSES: '1',
  WEBHOOK_RETRY_SCHEDULE_MS: SCHEDULE,
  WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
});

afterAll(async () => {
  // After the app (the fixture closes it first): its shutdown waits for POSTs in flight.
  await receiver?.close();
});

function http() {
  return request(t.app.getHttpServer());
}

/** The `Authorization` header of each organization created here, by id. */
const keys = new Map<string, { authorization: string }>();

function auth(organizationId: string): { authorization: string } {
  const header = keys.get(organizationId);
  if (!header) throw new Error(`no API key for ${organizationId}`);
  return header;
}

async function createOrganization(name: string): Promise<string> {
  const tenant = await createTenant(t.app.getHttpServer(), name);
  keys.set(tenant.id, tenant.auth);
  return tenant.id;
}

/** Registers an endpoint at `path` of the receiver and tells the receiver its secret. */
async function registerEndpoint(
  organizationId: string,
  path: string,
  events: string[],
): Promise<{ id: string; secret: string }> {
  const res = await http()
    .post(`/organizations/${organizationId}/webhooks`)
    .set(auth(organizationId))
    .send({ url: receiver.url(path), events })
    .expect(201);
  receiver.trust(path, plantSecret(res.body.secret));
  return res.body;
}

async function inviteMember(organizationId: string, email: string): Promise<string> {
  const res = await http()
    .post(`/organizations/${organizationId}/members`)
    .set(auth(organizationId))
    .send({ email, role: 'member' })
    .expect(201);
  return res.body.eventId;
}

async function issueAndPay(
  organizationId: string,
  number: string,
): Promise<{ invoiceId: string; issuedEventId: string; paidEventId: string }> {
  const issued = await http()
    .post(`/organizations/${organizationId}/invoices`)
    .set(auth(organizationId))
    .send({ number, amountCents: 4200, currency: 'EUR' })
    .expect(201);
  const paid = await http()
    .post(`/organizations/${organizationId}/invoices/${issued.body.id}/pay`)
    .set(auth(organizationId))
    .expect(201);
  return {
    invoiceId: issued.body.id,
    issuedEventId: issued.body.eventId,
    paidEventId: paid.body.eventId,
  };
}

/** Every outbox event settled for good: domain events, fan-outs, and every delivery's tries. */
async function settle(): Promise<void> {
  await waitUntilDelivered(t.sql);
}

function deliveryRows(endpointId: string) {
  return webhookDeliveries(t.sql, { endpointId });
}

/** The delivery event id of (event, endpoint): the `webhook-id` the receiver sees. */
async function deliveryId(eventId: string, endpointId: string): Promise<string> {
  const rows = (await deliveryRows(endpointId)).filter((r) => r.event_id === eventId);
  expect(rows).toHaveLength(1);
  return rows[0].id;
}

async function occurredAt(eventId: string): Promise<string> {
  const { rows } = await t.sql.query<{ occurred_at: Date }>(
    'SELECT occurred_at FROM outbox_event WHERE id = $1',
    [eventId],
  );
  return rows[0].occurred_at.toISOString();
}

describe('webhook endpoints', () => {
  it('a database failure is a 500 whose log line holds neither the request nor the generated secret', async () => {
    const organizationId = await createOrganization('Leaky');
    const token = plantSecret(`tok-${randomUUID()}`);
    const before = capturedLineCount();
    await t.sql.query('ALTER TABLE webhook_endpoint RENAME TO webhook_endpoint_away');
    try {
      const res = await http()
        .post(`/organizations/${organizationId}/webhooks`)
        .set(auth(organizationId))
        .send({ url: `https://hooks.example/in?token=${token}`, events: ['member.invited'] });
      expect(res.status).toBe(500);
      expect(JSON.stringify(res.body)).not.toContain(token);
    } finally {
      await t.sql.query('ALTER TABLE webhook_endpoint_away RENAME TO webhook_endpoint');
    }
    // The failure was logged (the guard saw it), without the secret or the query's parameters.
    expect(capturedLineCount()).toBeGreaterThan(before);
    expect(leakedLines()).toEqual([]);
  });

  it('a database failure while checking a credential logs neither the operator token nor the API key', async () => {
    // Both are planted: the operator token by the app's test setup, the key by createTenant.
    const organizationId = await createOrganization('Keyleak');
    const before = capturedLineCount();
    await t.sql.query('ALTER TABLE organization RENAME TO organization_away');
    try {
      const tenant = await http().get('/webhooks/deliveries').set(auth(organizationId)).expect(500);
      const operator = await http()
        .post('/organizations')
        .set(OPERATOR)
        .send({ name: 'Nowhere', adminEmail: 'admin@nowhere.test' })
        .expect(500);
      const answers = JSON.stringify([tenant.body, operator.body]);
      expect(answers).not.toContain(auth(organizationId).authorization.slice(7));
      expect(answers).not.toContain(OPERATOR.authorization.slice(7));
    } finally {
      await t.sql.query('ALTER TABLE organization_away RENAME TO organization');
    }
    expect(capturedLineCount()).toBeGreaterThan(before + 1);
    expect(leakedLines()).toEqual([]);
  });

  it('registering returns the id, url, events and a whsec_ secret shown only there', async () => {
    const organizationId = await createOrganization('Regist');
    const res = await http()
      .post(`/organizations/${organizationId}/webhooks`)
      .set(auth(organizationId))
      .send({ url: receiver.url('/hooks/regist'), events: ['invoice.paid'] })
      .expect(201);
    expect(Object.keys(res.body).sort()).toEqual(['events', 'id', 'secret', 'url']);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      url: receiver.url('/hooks/regist'),
      events: ['invoice.paid'],
      // 24 random bytes are 32 base64 characters, without padding.
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{32}$/),
    });
    const { rows } = await t.sql.query(
      'SELECT organization_id, url, secret, event_types, enabled FROM webhook_endpoint WHERE id = $1',
      [res.body.id],
    );
    expect(rows).toEqual([
      {
        organization_id: organizationId,
        url: receiver.url('/hooks/regist'),
        secret: res.body.secret,
        event_types: ['invoice.paid'],
        enabled: true,
      },
    ]);
    const other = await http()
      .post(`/organizations/${organizationId}/webhooks`)
      .set(auth(organizationId))
      .send({ url: receiver.url('/hooks/regist'), events: ['invoice.paid'] })
      .expect(201);
    expect(other.body.secret).not.toBe(res.body.secret);
  });

  it.each([
    ['ftp://example.com/hook'],
    ['javascript:alert(1)'],
    ['http://user:hunter2@127.0.0.1/hook'],
    ['not a url'],
  ])('a url of %s gets a 400 naming url, and nothing is written', async (url) => {
    const organizationId = await createOrganization('Badurl');
    const res = await http()
      .post(`/organizations/${organizationId}/webhooks`)
      .set(auth(organizationId))
      .send({ url, events: ['invoice.paid'] })
      .expect(400);
    expect(res.body.message).toEqual(['url must be a URL address']);
    const { rows } = await t.sql.query(
      'SELECT count(*)::int AS n FROM webhook_endpoint WHERE organization_id = $1',
      [organizationId],
    );
    expect(rows[0].n).toBe(0);
  });

  it('events must be a non-empty subset of the public event types', async () => {
    const organizationId = await createOrganization('Badevents');
    for (const events of [
      [],
      ['organization.created'],
      ['invoice.paid', 'invoice.refunded'],
      'invoice.paid',
    ]) {
      const res = await http()
        .post(`/organizations/${organizationId}/webhooks`)
        .set(auth(organizationId))
        .send({ url: receiver.url('/hooks/bad'), events })
        .expect(400);
      expect(JSON.stringify(res.body.message)).toContain('events');
    }
    await http()
      .post(`/organizations/${organizationId}/webhooks`)
      .set(auth(organizationId))
      .send({
        url: receiver.url('/hooks/good'),
        events: ['member.invited', 'invoice.issued', 'invoice.paid'],
      })
      .expect(201);
  });

  it("an organization that does not exist, or is not the key's, is a 404", async () => {
    const mine = await createOrganization('Mine');
    const theirs = await createOrganization('Theirs');
    for (const organizationId of [randomUUID(), theirs]) {
      const res = await http()
        .post(`/organizations/${organizationId}/webhooks`)
        .set(auth(mine))
        .send({ url: receiver.url('/hooks/nobody'), events: ['invoice.paid'] })
        .expect(404);
      expect(res.body.message).toMatch(/organization .* does not exist/);
    }
    const { rows } = await t.sql.query(
      'SELECT count(*)::int AS n FROM webhook_endpoint WHERE organization_id = $1',
      [theirs],
    );
    expect(rows[0].n).toBe(0);
  });
});

describe('webhook delivery', () => {
  it('each endpoint receives exactly the types it subscribed to, signed, with webhook-id = the delivery event id', async () => {
    const organizationId = await createOrganization('Acme');
    const bystander = await createOrganization('Bystander');
    const main = await registerEndpoint(organizationId, '/hooks/acme', [
      'invoice.paid',
      'member.invited',
    ]);
    const issuedOnly = await registerEndpoint(organizationId, '/hooks/acme-issued', [
      'invoice.issued',
    ]);
    const elsewhere = await registerEndpoint(bystander, '/hooks/bystander', [
      'member.invited',
      'invoice.issued',
      'invoice.paid',
    ]);

    const invitedEventId = await inviteMember(organizationId, 'grace@acme.test');
    const { invoiceId, issuedEventId, paidEventId } = await issueAndPay(organizationId, 'INV-1');
    await settle();

    const invitedDelivery = await deliveryId(invitedEventId, main.id);
    const paidDelivery = await deliveryId(paidEventId, main.id);
    const received = receiver.requestsTo('/hooks/acme');
    expect(received.map((r) => r.headers['webhook-id']).sort()).toEqual(
      [invitedDelivery, paidDelivery].sort(),
    );
    for (const r of received) {
      expect(r).toMatchObject({ method: 'POST', verified: true, response: 204 });
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.headers['webhook-timestamp']).toMatch(/^\d{10}$/);
      expect(r.headers['webhook-signature']).toMatch(/^v1,/);
    }
    const byType = new Map(received.map((r) => [(r.body as { type: string }).type, r.body]));
    const { rows: members } = await t.sql.query(
      `SELECT id FROM member WHERE organization_id = $1 AND email = 'grace@acme.test'`,
      [organizationId],
    );
    expect(byType.get('member.invited')).toEqual({
      type: 'member.invited',
      timestamp: await occurredAt(invitedEventId),
      data: {
        memberId: members[0].id,
        email: 'grace@acme.test',
        role: 'member',
        eventId: invitedEventId,
        organizationId,
        aggregateType: 'member',
        aggregateId: members[0].id,
      },
    });
    expect(byType.get('invoice.paid')).toEqual({
      type: 'invoice.paid',
      timestamp: await occurredAt(paidEventId),
      data: {
        invoiceId,
        number: 'INV-1',
        amountCents: 4200,
        currency: 'EUR',
        eventId: paidEventId,
        organizationId,
        aggregateType: 'invoice',
        aggregateId: invoiceId,
      },
    });

    const issuedDelivery = await deliveryId(issuedEventId, issuedOnly.id);
    const issued = receiver.requestsTo('/hooks/acme-issued');
    expect(issued.map((r) => [r.headers['webhook-id'], r.verified])).toEqual([
      [issuedDelivery, true],
    ]);
    expect(receiver.requestsTo('/hooks/bystander')).toEqual([]);
    expect(await deliveryRows(elsewhere.id)).toEqual([]);

    // Each delivery is an outbox event caused by the public event, in its chain.
    const { rows: chain } = await t.sql.query(
      `SELECT causation_id, correlation_id FROM outbox_event WHERE id = $1`,
      [paidDelivery],
    );
    expect(chain).toEqual([{ causation_id: paidEventId, correlation_id: paidEventId }]);
    expect(await deliveryRows(main.id)).toEqual([
      expect.objectContaining({
        id: invitedDelivery,
        event_type: 'member.invited',
        attempts: 1,
        delivered_at: expect.any(Date),
        dead_at: null,
        last_error: null,
      }),
      expect.objectContaining({
        id: paidDelivery,
        event_type: 'invoice.paid',
        attempts: 1,
        delivered_at: expect.any(Date),
      }),
    ]);

    const listing = await http().get('/webhooks/deliveries').set(auth(organizationId)).expect(200);
    expect(listing.body).toHaveLength(3);
    expect(listing.body.map((d: { id: string }) => d.id).sort()).toEqual(
      [invitedDelivery, paidDelivery, issuedDelivery].sort(),
    );
    for (const d of listing.body) {
      expect(d).toMatchObject({ status: 'delivered', attempts: 1, organizationId });
    }
    expect(JSON.stringify(listing.body)).not.toContain('whsec_');
    expect(JSON.stringify(listing.body)).not.toContain(main.secret.slice(6));
  });

  it('a disabled endpoint gets no delivery', async () => {
    const organizationId = await createOrganization('Quiet');
    const endpoint = await registerEndpoint(organizationId, '/hooks/quiet', ['invoice.paid']);
    await http()
      .patch(`/organizations/${organizationId}/webhooks/${endpoint.id}`)
      .set(auth(organizationId))
      .send({ enabled: false })
      .expect(200, { id: endpoint.id, enabled: false });
    await issueAndPay(organizationId, 'Q-1');
    await settle();
    expect(await deliveryRows(endpoint.id)).toEqual([]);
    expect(receiver.requestsTo('/hooks/quiet')).toEqual([]);
  });

  it('enabling takes { enabled: boolean } and a known endpoint of the organization', async () => {
    const organizationId = await createOrganization('Toggle');
    const endpoint = await registerEndpoint(organizationId, '/hooks/toggle', ['invoice.paid']);
    const path = `/organizations/${organizationId}/webhooks/${endpoint.id}`;
    const bad = await http()
      .patch(path)
      .set(auth(organizationId))
      .send({ enabled: 'no' })
      .expect(400);
    expect(JSON.stringify(bad.body.message)).toContain('enabled');
    await http()
      .patch(`/organizations/${organizationId}/webhooks/${randomUUID()}`)
      .set(auth(organizationId))
      .send({ enabled: true })
      .expect(404);
    await http()
      .patch(path)
      .set(auth(organizationId))
      .send({ enabled: true })
      .expect(200, { id: endpoint.id, enabled: true });
  });

  it('a receiver failing the first 2 requests makes the sender retry until it accepts, with one accepted POST', async () => {
    const organizationId = await createOrganization('Flaky');
    const endpoint = await registerEndpoint(organizationId, '/hooks/flaky', ['invoice.paid']);
    receiver.failNext(2);
    const { paidEventId } = await issueAndPay(organizationId, 'FL-1');
    await settle();

    const id = await deliveryId(paidEventId, endpoint.id);
    const received = receiver.requestsTo('/hooks/flaky');
    expect(received.map((r) => [r.headers['webhook-id'], r.verified, r.response])).toEqual([
      [id, true, 500],
      [id, true, 500],
      [id, true, 204],
    ]);
    expect(received.filter((r) => r.response === 204)).toHaveLength(1);
    // Every attempt carries the same body; only the timestamp and signature are new.
    expect(new Set(received.map((r) => r.rawBody)).size).toBe(1);
    expect(await deliveryRows(endpoint.id)).toEqual([
      expect.objectContaining({ id, attempts: 3, delivered_at: expect.any(Date), dead_at: null }),
    ]);
  });

  it(`a delivery that fails ${MAX_ATTEMPTS} times is dead, with a scrubbed error, and a replay through the API delivers it`, async () => {
    const organizationId = await createOrganization('Broken');
    const endpoint = await registerEndpoint(organizationId, '/hooks/broken', ['invoice.paid']);
    receiver.failNext(MAX_ATTEMPTS, 'cannot reach db at postgres://app:hunter2@db/app');
    const { paidEventId } = await issueAndPay(organizationId, 'BR-1');
    await settle();

    expect(receiver.requestsTo('/hooks/broken').map((r) => r.response)).toEqual(
      Array(MAX_ATTEMPTS).fill(500),
    );
    const id = await deliveryId(paidEventId, endpoint.id);
    const [row] = await deliveryRows(endpoint.id);
    expect(row).toMatchObject({
      id,
      attempts: MAX_ATTEMPTS,
      delivered_at: null,
      dead_at: expect.any(Date),
    });
    expect(row.last_error).toContain('HTTP 500: cannot reach db at postgres://[redacted]@db/app');
    expect(row.last_error).not.toContain('hunter2');
    const listing = await http().get('/webhooks/deliveries').set(auth(organizationId)).expect(200);
    expect(listing.body).toEqual([
      expect.objectContaining({ id, status: 'dead', attempts: MAX_ATTEMPTS }),
    ]);

    // The receiver is fixed; an operator replays the dead delivery.
    const replay = `/webhooks/deliveries/${id}/replay`;
    // Another organization's key finds no such delivery.
    const other = await createOrganization('Other');
    await http().post(replay).set(auth(other)).expect(404);
    const replayed = await http().post(replay).set(auth(organizationId)).expect(202);
    expect(replayed.body).toMatchObject({ id, status: 'dead' });
    await eventually('the replayed delivery is delivered', async () => {
      const [again] = await deliveryRows(endpoint.id);
      return again.delivered_at !== null;
    });
    expect(receiver.requestsTo('/hooks/broken').map((r) => r.response)).toEqual([
      ...Array(MAX_ATTEMPTS).fill(500),
      204,
    ]);
    // Delivered now: there is nothing left to replay.
    await http().post(replay).set(auth(organizationId)).expect(409);
  });

  it('a POST without an answer in time is a failed attempt (timeout), retried like any other', async () => {
    const organizationId = await createOrganization('Slow');
    const endpoint = await registerEndpoint(organizationId, '/hooks/slow', ['member.invited']);
    receiver.hangNext(MAX_ATTEMPTS);
    const eventId = await inviteMember(organizationId, 'sloth@slow.test');
    await settle();

    expect(receiver.requestsTo('/hooks/slow').map((r) => r.response)).toEqual(
      Array(MAX_ATTEMPTS).fill('hung'),
    );
    const [row] = await deliveryRows(endpoint.id);
    expect(row).toMatchObject({
      event_id: eventId,
      attempts: MAX_ATTEMPTS,
      dead_at: expect.any(Date),
    });
    expect(row.last_error).toContain(`TimeoutError: no complete response within ${TIMEOUT_MS} ms`);
  });

  it('a forced redelivery of the public events runs the fan-out again but adds no delivery and no POST', async () => {
    const organizationId = await createOrganization('Replay');
    const endpoint = await registerEndpoint(organizationId, '/hooks/replay', [
      'invoice.paid',
      'member.invited',
    ]);
    const invitedEventId = await inviteMember(organizationId, 'rita@replay.test');
    const { issuedEventId, paidEventId } = await issueAndPay(organizationId, 'RE-1');
    await settle();
    expect(receiver.requestsTo('/hooks/replay')).toHaveLength(2);
    const before = await deliveryRows(endpoint.id);
    const requestsBefore = receiver.requests.length;

    const publicEvents = [invitedEventId, issuedEventId, paidEventId];
    expect(await forceRedelivery(t.sql, publicEvents)).toBe(3);
    await settle();

    const { rows: redelivered } = await t.sql.query(
      `SELECT deliveries ? 'webhook-fanout' AS fanned_out FROM outbox_event WHERE id = $1`,
      [paidEventId],
    );
    expect(redelivered).toEqual([{ fanned_out: true }]);
    // The fan-out emitted the same delivery ids again: duplicates, dropped by the outbox.
    expect(await deliveryRows(endpoint.id)).toEqual(before);
    expect(receiver.requests).toHaveLength(requestsBefore);
  });

  it('listing deliveries needs an API key', async () => {
    const res = await http().get('/webhooks/deliveries').expect(401);
    expect(res.headers['www-authenticate']).toBe('Bearer');
  });
});
