import request from 'supertest';
import { useReferenceApp, rowCounts, OPERATOR } from '../support/reference-app';
import { createTenant } from '../support/tenant';

/**
 * Input PostgreSQL cannot store as given (NUL, lone surrogates) or that would exhaust the stack
 * (deeply nested JSON) is a 400 naming the field, and nothing is written.
 */

const t = useReferenceApp({ WEBHOOK_ALLOW_PRIVATE_ADDRESSES: '1' });
let organizationId: string;
let invoiceId: string;
let key: { authorization: string };

beforeAll(async () => {
  // Its endpoints point at 127.0.0.1: only what the input check refuses must fail here.
  const org = await createTenant(t.app.getHttpServer(), 'Valid');
  organizationId = org.id;
  key = org.auth;
  const invoice = await http()
    .post(`/organizations/${organizationId}/invoices`)
    .set(key)
    .send({ number: 'INV-1', amountCents: 100, currency: 'EUR' })
    .expect(201);
  invoiceId = invoice.body.id;
});

function http() {
  return request(t.app.getHttpServer());
}

/**
 * POSTs `body` (an object, or raw text of `type`), expects a 400 and that nothing was written;
 * returns the body's message as JSON text.
 */
async function refused(path: string, body: object | string, type = 'json'): Promise<string> {
  const before = await rowCounts(t.sql);
  const res = await http()
    .post(path)
    .set(path === '/organizations' ? OPERATOR : key)
    .type(type)
    .send(body)
    .expect('content-type', /json/)
    .expect(400);
  expect(await rowCounts(t.sql)).toEqual(before);
  return JSON.stringify(res.body.message);
}

/** `{"name":{"a":{"a":...}}}`-style JSON text, nested `depth` levels below `field`. */
function deepBody(field: string, depth: number): string {
  return `{"${field}":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`;
}

describe('reference app bad input', () => {
  const NUL = 'must not contain NUL (\\\\u0000)';
  const SURROGATE = 'must not contain a lone UTF-16 surrogate';

  it('refuses NUL in an organization name', async () => {
    const message = await refused('/organizations', {
      name: 'Ac\u0000me',
      adminEmail: 'ada@acme.test',
    });
    expect(message).toContain(`name ${NUL}`);
  });

  it('refuses NUL in a webhook url without echoing the endpoint secret', async () => {
    const message = await refused(`/organizations/${organizationId}/webhooks`, {
      url: 'http://127.0.0.1:9/hook\u0000',
      events: ['invoice.paid'],
    });
    expect(message).toContain(`url ${NUL}`);
    expect(message).not.toContain('whsec_');
  });

  it.each([
    ['/organizations', { name: 'Beta\ud800', adminEmail: 'b@beta.test' }, 'name', SURROGATE],
    ['/organizations', { name: 'Beta', adminEmail: 'b\udc00@beta.test' }, 'adminEmail', SURROGATE],
    ['/members', { email: 'x\ud800@beta.test', role: 'member' }, 'email', SURROGATE],
    ['/members', { email: 'x@beta.test', role: 'member\u0000' }, 'role', NUL],
    ['/invoices', { number: 'INV-\udfff', amountCents: 1, currency: 'EUR' }, 'number', SURROGATE],
    ['/invoices', { number: 'INV-2', amountCents: 1, currency: 'EU\u0000' }, 'currency', NUL],
    ['/webhooks', { url: 'http://127.0.0.1:9/\ud800', events: ['invoice.paid'] }, 'url', SURROGATE],
    ['/webhooks', { url: 'http://127.0.0.1:9/', events: ['invoice.paid\u0000'] }, 'events[0]', NUL],
  ])('refuses a bad string on %s in %j', async (route, body, field, problem) => {
    const message = await refused(routePath(route), body);
    expect(message).toContain(`${field} ${problem}`);
  });

  it.each([
    ['/organizations', 'name'],
    ['/members', 'email'],
    ['/invoices', 'number'],
    ['/webhooks', 'url'],
    ['/pay', 'note'],
  ])('refuses a 5,000-deep body on %s, naming %s', async (route, field) => {
    const message = await refused(routePath(route), deepBody(field, 5_000));
    expect(message).toContain(`${field} is nested deeper than`);
  });

  it('leaves an invoice unpaid when the pay request carries a deep body', async () => {
    await refused(routePath('/pay'), deepBody('note', 5_000));
    const { rows } = await t.sql.query('SELECT status FROM invoice WHERE id = $1', [invoiceId]);
    expect(rows).toEqual([{ status: 'issued' }]);
  });

  it('refuses 40,000 nested arrays, about as deep as the 100 kB body limit allows', async () => {
    const depth = 40_000;
    const message = await refused(
      '/organizations',
      `{"name":${'['.repeat(depth)}${']'.repeat(depth)}}`,
    );
    expect(message).toContain('name is nested deeper than 32 levels');
  });

  it.each([
    [{ 'na\u0000me': 'x' }, 'body must not have a key containing NUL'],
    [
      { name: 'Gamma', adminEmail: 'g@gamma.test', extra: { '\ud800': 1 } },
      'extra must not have a key containing a lone UTF-16 surrogate',
    ],
  ])('refuses a bad key in %j', async (body, expected) => {
    expect(await refused('/organizations', body)).toContain(expected);
  });

  it('refuses a form-encoded body with 415 before reading it', async () => {
    const before = await rowCounts(t.sql);
    await http()
      .post('/organizations')
      .type('form')
      .send('name=Ac%00me&adminEmail=a%40acme.test')
      .expect(415);
    expect(await rowCounts(t.sql)).toEqual(before);
  });

  it('refuses NUL in the query string', async () => {
    const res = await http().get('/audit?organizationId=%00').expect(400);
    expect(JSON.stringify(res.body.message)).toContain(`organizationId ${NUL}`);
  });

  it('refuses a deeply nested top-level array', async () => {
    const message = await refused('/organizations', `${'['.repeat(5_000)}${']'.repeat(5_000)}`);
    expect(message).toContain('body[0] is nested deeper than 32 levels');
  });

  it('refuses malformed JSON', async () => {
    await refused('/organizations', '{"name": "Acme",');
  });

  it('still accepts reasonable nesting where a route takes it', async () => {
    await http()
      .post(`/organizations/${organizationId}/webhooks`)
      .set(key)
      .send({ url: 'http://127.0.0.1:9/ok', events: ['invoice.paid', 'invoice.issued'] })
      .expect(201);
  });
});

function routePath(route: string): string {
  if (route === '/organizations') return route;
  if (route === '/pay') return `/organizations/${organizationId}/invoices/${invoiceId}/pay`;
  return `/organizations/${organizationId}${route}`;
}

describe('the reference app and body parser refusals', () => {
  it('answers a body over the size limit with 413, not 500', async () => {
    const res = await http()
      .post('/organizations')
      .set('content-type', 'application/json')
      .send(JSON.stringify({ name: 'x'.repeat(200_000), adminEmail: 'a@b.test' }));
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ statusCode: 413, message: 'request entity too large' });
  });
});
