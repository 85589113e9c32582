import { createHash } from 'node:crypto';
import request from 'supertest';
import { plantSecret } from '../support/log-guard';
import { waitUntilDelivered } from '../support/redelivery';
import { OPERATOR, rowCounts, useReferenceApp } from '../support/reference-app';
import { bearer, createTenant, type Tenant } from '../support/tenant';
import { WebhookReceiver } from '../support/webhook-receiver';

/**
 * Every tenant route acts for the organization whose API key it carries, and for no other:
 * another organization's resources are 404s, its rows never appear in a list, and a request
 * without a valid key is a 401 that changes nothing. Organizations are the operator's to create.
 */

const t = useReferenceApp({ WEBHOOK_ALLOW_PRIVATE_ADDRESSES: '1' });
let receiver: WebhookReceiver;
let acme: Tenant;
let globex: Tenant;
/** Globex's resources, which Acme's key must never reach. */
const theirs = { invoiceId: '', endpointId: '', memberId: '' };

const TABLES = [
  'organization',
  'member',
  'invoice',
  'webhook_endpoint',
  'outbox_event',
  'notification',
  'mail_log',
];

beforeAll(async () => {
  receiver = await WebhookReceiver.start();
  acme = await createTenant(t.app.getHttpServer(), 'Acme');
  globex = await createTenant(t.app.getHttpServer(), 'Globex');
  for (const tenant of [acme, globex]) {
    const endpoint = await http()
      .post(`/organizations/${tenant.id}/webhooks`)
      .set(tenant.auth)
      .send({ url: receiver.url(`/hooks/${tenant.name}`), events: ['invoice.issued'] })
      .expect(201);
    const member = await http()
      .post(`/organizations/${tenant.id}/members`)
      .set(tenant.auth)
      .send({ email: `bob@${tenant.name.toLowerCase()}.test`, role: 'admin' })
      .expect(201);
    const invoice = await http()
      .post(`/organizations/${tenant.id}/invoices`)
      .set(tenant.auth)
      .send({ number: 'INV-1', amountCents: 100, currency: 'EUR' })
      .expect(201);
    if (tenant === globex) {
      Object.assign(theirs, {
        invoiceId: invoice.body.id,
        endpointId: endpoint.body.id,
        memberId: member.body.id,
      });
    }
  }
  await waitUntilDelivered(t.sql);
});

afterAll(async () => {
  await receiver?.close();
});

function http() {
  return request(t.app.getHttpServer());
}

async function snapshot(): Promise<Record<string, unknown>> {
  const counts = await rowCounts(t.sql, TABLES);
  const { rows } = await t.sql.query(
    `SELECT id, status FROM invoice UNION ALL SELECT id, enabled::text FROM webhook_endpoint
     UNION ALL SELECT id, encode(api_key_hash, 'hex') FROM organization ORDER BY 1`,
  );
  return { counts, rows };
}

type Method = 'get' | 'post' | 'patch';

/** Every tenant route, for the organization `id`, with a body it would accept. */
function tenantRoutes(id: string): [Method, string, object?][] {
  return [
    ['post', `/organizations/${id}/members`, { email: 'mallory@evil.test', role: 'admin' }],
    ['get', `/organizations/${id}/members`],
    ['post', `/organizations/${id}/invoices`, { number: 'X-1', amountCents: 1, currency: 'EUR' }],
    ['post', `/organizations/${id}/invoices/${theirs.invoiceId}/pay`],
    [
      'post',
      `/organizations/${id}/webhooks`,
      { url: 'https://evil.example/', events: ['invoice.paid'] },
    ],
    ['patch', `/organizations/${id}/webhooks/${theirs.endpointId}`, { enabled: false }],
    ['get', '/webhooks/deliveries'],
    ['post', `/webhooks/deliveries/${theirs.endpointId}/replay`],
    ['get', '/audit'],
    ['get', '/notifications'],
    ['get', '/mails'],
  ];
}

function send(method: Method, path: string, body: object | undefined, headers: object) {
  const req = http()
    [method](path)
    .set(headers as Record<string, string>);
  return body ? req.send(body) : req;
}

describe('credentials', () => {
  it('POST /organizations needs the operator token and answers the API key once; only its hash is stored', async () => {
    const before = await snapshot();
    await http().post('/organizations').send({ name: 'X', adminEmail: 'x@x.test' }).expect(401);
    await http()
      .post('/organizations')
      .set(acme.auth)
      .send({ name: 'X', adminEmail: 'x@x.test' })
      .expect(401);
    expect(await snapshot()).toEqual(before);

    expect(acme.apiKey).toMatch(new RegExp(`^oak_${acme.id}_[A-Za-z0-9_-]{43}$`));
    const { rows } = await t.sql.query(
      `SELECT to_jsonb(o) AS row FROM organization o WHERE id = $1`,
      [acme.id],
    );
    const stored = JSON.stringify(rows[0].row);
    expect(stored).not.toContain(acme.apiKey.slice(-43));
    expect(rows[0].row.api_key_hash).toBe(
      `\\x${createHash('sha256').update(acme.apiKey).digest('hex')}`,
    );
  });

  it('GET /health and GET /health/live need no credentials', async () => {
    await http().get('/health').expect(200);
    const live = await http().get('/health/live').expect(200);
    expect(live.body.info.outbox).toMatchObject({ status: 'up', state: 'running' });
  });

  it.each([
    ['no credentials', {}],
    ['a malformed key', { authorization: 'Bearer oak_nope' }],
    ['the operator token', OPERATOR],
    ['a key with the right id and a wrong secret', 'forged'],
    ['a key in another scheme', 'basic'],
  ])('every tenant route answers %s with a 401, and nothing changes', async (_, given) => {
    const headers =
      given === 'forged'
        ? bearer(`oak_${acme.id}_${'A'.repeat(43)}`)
        : given === 'basic'
          ? { authorization: `Basic ${acme.apiKey}` }
          : given;
    const before = await snapshot();
    for (const [method, path, body] of tenantRoutes(acme.id)) {
      const res = await send(method, path, body, headers);
      expect({ method, path, status: res.status }).toEqual({ method, path, status: 401 });
      expect(res.headers['www-authenticate']).toBe('Bearer');
    }
    expect(await snapshot()).toEqual(before);
  });
});

describe('one organization, one key', () => {
  it("Acme's key on Globex's routes is a 404, and nothing changes", async () => {
    const before = await snapshot();
    for (const [method, path, body] of tenantRoutes(globex.id).filter(([, p]) =>
      p.startsWith('/organizations/'),
    )) {
      const res = await send(method, path, body, acme.auth);
      expect({ method, path, status: res.status }).toEqual({ method, path, status: 404 });
      expect(JSON.stringify(res.body)).not.toContain('Globex');
    }
    // Globex's invoice and endpoint under Acme's own path are no more Acme's.
    await http()
      .post(`/organizations/${acme.id}/invoices/${theirs.invoiceId}/pay`)
      .set(acme.auth)
      .expect(404);
    await http()
      .patch(`/organizations/${acme.id}/webhooks/${theirs.endpointId}`)
      .set(acme.auth)
      .send({ enabled: false })
      .expect(404);
    expect(await snapshot()).toEqual(before);
  });

  it("Acme's own id in another letter case is a 404: its rows are never filed under another spelling", async () => {
    const before = await snapshot();
    for (const [method, path, body] of tenantRoutes(acme.id.toUpperCase()).filter(([, p]) =>
      p.startsWith('/organizations/'),
    )) {
      const res = await send(method, path, body, acme.auth);
      expect({ method, path, status: res.status }).toEqual({ method, path, status: 404 });
    }
    expect(await snapshot()).toEqual(before);
  });

  it("every list holds the key's organization's rows only", async () => {
    const lists: [string, (row: Record<string, unknown>) => unknown][] = [
      [`/organizations/${acme.id}/members`, (m) => m.organizationId],
      ['/webhooks/deliveries', (d) => d.organizationId],
      ['/notifications', (n) => n.organizationId],
      ['/mails', (m) => (m.body as string).match(/Organization: (\S+)/)?.[1]],
    ];
    for (const [path, organizationOf] of lists) {
      const res = await http().get(path).set(acme.auth).expect(200);
      const rows = res.body as Record<string, unknown>[];
      expect({ path, some: rows.length > 0 }).toEqual({ path, some: true });
      expect({ path, organizations: [...new Set(rows.map(organizationOf))] }).toEqual({
        path,
        organizations: [acme.id],
      });
      expect(JSON.stringify(rows)).not.toContain(globex.id);
    }
    const audit = await http().get('/audit').set(acme.auth).expect(200);
    expect(
      new Set(audit.body.entries.map((e: { organizationId: string }) => e.organizationId)),
    ).toEqual(new Set([acme.id]));
    // A filter naming another organization is refused, not obeyed.
    await http()
      .get('/notifications')
      .set(acme.auth)
      .query({ organizationId: globex.id })
      .expect(400);
  });

  it("an operator's new key replaces the old one at once", async () => {
    const tenant = await createTenant(t.app.getHttpServer(), 'Rotating');
    await http().get('/audit').set(tenant.auth).expect(200);
    await http().post(`/organizations/${tenant.id}/api-key`).set(tenant.auth).expect(401);
    const issued = await http()
      .post(`/organizations/${tenant.id}/api-key`)
      .set(OPERATOR)
      .expect(201);
    expect(issued.body).toEqual({ id: tenant.id, apiKey: expect.stringMatching(/^oak_/) });
    plantSecret(issued.body.apiKey);
    await http().get('/audit').set(tenant.auth).expect(401);
    await http().get('/audit').set(bearer(issued.body.apiKey)).expect(200);
  });
});
