import { createHmac } from 'node:crypto';
import request from 'supertest';
import {
  useReferenceApp,
  createReferenceApp,
  rowCounts,
  OPERATOR,
  OPERATOR_TOKEN,
} from '../support/reference-app';

/**
 * The API answers requests from its own pages and clients only: bodies are JSON (a browser
 * cannot post JSON across sites without a preflight), and a `Host` outside ALLOWED_HOSTS is
 * refused before any route, so a page on a rebound name reaches nothing.
 */

const t = useReferenceApp();

function http() {
  return request(t.app.getHttpServer());
}

describe('bodies', () => {
  it.each([
    ['form', 'name=Acme&adminEmail=ada%40acme.test'],
    ['text/plain', '{"name":"Acme","adminEmail":"ada@acme.test"}'],
    [
      'multipart/form-data; boundary=x',
      '--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--x--',
    ],
  ])('a %s body on POST /organizations is a 415, and nothing is written', async (type, body) => {
    const before = await rowCounts(t.sql);
    const res = await http().post('/organizations').type(type).send(body).expect(415);
    expect(res.body.message).toContain('must be JSON');
    expect(await rowCounts(t.sql)).toEqual(before);
  });

  it('a form posted at a dead-letter replay, nested keys and all, is a 415', async () => {
    const res = await http()
      .post('/outbox/dead-letters/replay')
      .type('form')
      .send('filter[types][0]=organization.created&all=true')
      .expect(415);
    expect(res.body.message).toContain('must be JSON');
  });
});

describe('hosts', () => {
  it.each([['evil.example'], ['evil.example:3000'], ['127.0.0.1.evil.example'], ['']])(
    'a request for Host %j is a 421 on every route but the health probe, before any runs',
    async (host) => {
      const before = await rowCounts(t.sql);
      for (const [method, path] of [
        ['get', '/outbox/ui'],
        ['get', '/outbox'],
        ['get', '/no-such-route'],
        ['post', '/organizations'],
      ] as const) {
        const res = await http()[method](path).set('host', host).send({ name: 'x' });
        expect({ method, path, status: res.status }).toEqual({ method, path, status: 421 });
      }
      expect(await rowCounts(t.sql)).toEqual(before);
    },
  );

  it('a page on a name rebound to 127.0.0.1 does not reach the dashboard', async () => {
    // The browser connects to 127.0.0.1 and names the page's host: the peer is loopback.
    const res = await http().get('/outbox/ui').set('host', 'rebound.evil.example:3000');
    expect(res.status).toBe(421);
    expect(res.text).not.toContain('Outbox');
  });

  it('a forwarded host outside the list is a 421 too', async () => {
    await http().get('/outbox').set(OPERATOR).set('x-forwarded-host', 'evil.example').expect(421);
  });

  it.each([['/health'], ['/health/live']])(
    "GET %s answers an orchestrator's probe, which names the pod's address",
    async (path) => {
      const probe = await http().get(path).set('host', '10.244.1.17:3000');
      expect(probe.body).toEqual(expect.objectContaining({ status: expect.any(String) }));
      await http().post(path).set('host', '10.244.1.17:3000').expect(421);
    },
  );

  it.each([['localhost:3000'], ['127.0.0.1'], ['[::1]:8080'], ['LOCALHOST']])(
    'the loopback name %s is answered',
    async (host) => {
      const res = await http().get('/no-such-route').set('host', host);
      expect(res.status).toBe(404);
    },
  );

  it('ALLOWED_HOSTS replaces the loopback names', async () => {
    const other = await createReferenceApp(t.db.url, { ALLOWED_HOSTS: 'api.example.com' });
    try {
      const server = other.getHttpServer();
      await request(server).get('/no-such-route').set('host', 'api.example.com').expect(404);
      await request(server).get('/no-such-route').set('host', '127.0.0.1').expect(421);
    } finally {
      await other.close();
    }
  });
});

describe('the dashboard', () => {
  const HOST = 'localhost:3000';
  const confirm = (origin: string | undefined, host = HOST) => {
    const req = http()
      .post('/outbox/ui/confirm')
      .set(OPERATOR)
      .set('host', host)
      .type('form')
      .send('action=replay&type=organization.created');
    return origin === undefined ? req : req.set('origin', origin);
  };

  it('refuses every page without the operator token or a session', async () => {
    const res = await http().get('/outbox/ui').expect(401);
    expect(res.text).toContain('/outbox/ui/login');
    await http().get('/outbox/ui').set('cookie', 'outbox_session=1.forged').expect(401);
    await http().get('/outbox/ui').set(OPERATOR).expect(200);
  });

  it('refuses a session that is well formed but not signed by this token, or expired', async () => {
    // Signed as the app signs (see OperatorToken), under a chosen token and expiry.
    const session = (token: string, expiresAt: number) => {
      const key = createHmac('sha256', token).update('outbox dashboard session').digest();
      const mac = createHmac('sha256', key).update(String(expiresAt)).digest('base64url');
      return `outbox_session=${expiresAt}.${mac}`;
    };
    const later = Date.now() + 3_600_000;
    await http().get('/outbox/ui').set('cookie', session(OPERATOR_TOKEN, later)).expect(200);
    const refused = [
      session(OPERATOR_TOKEN, Date.now() - 1000),
      session(`${OPERATOR_TOKEN}-rotated`, later),
      `outbox_session=${later}.${'A'.repeat(43)}`,
      session(OPERATOR_TOKEN, later).replace(String(later), String(later + 1)),
    ];
    for (const cookie of refused) {
      const res = await http().get('/outbox/ui').set('cookie', cookie);
      expect({ cookie, status: res.status }).toEqual({ cookie, status: 401 });
    }
  });

  it('takes a form only from a page of its own, on an allowed host', async () => {
    await confirm(`http://${HOST}`).expect(200);
    for (const origin of ['http://evil.example', 'http://127.0.0.1:3000', 'null', undefined]) {
      const res = await confirm(origin);
      expect({ origin, status: res.status }).toEqual({ origin, status: 403 });
    }
  });

  it('signs in from its own page only, to an HttpOnly, SameSite=Strict session', async () => {
    const signIn = (origin: string, token: string) =>
      http()
        .post('/outbox/ui/login')
        .set('host', HOST)
        .set('origin', origin)
        .type('form')
        .send(`token=${encodeURIComponent(token)}`);
    const forged = await signIn('http://evil.example', OPERATOR_TOKEN).expect(403);
    expect(forged.headers['set-cookie']).toBeUndefined();
    const wrong = await signIn(`http://${HOST}`, 'not-the-token').expect(401);
    expect(wrong.headers['set-cookie']).toBeUndefined();

    const ok = await signIn(`http://${HOST}`, OPERATOR_TOKEN).expect(303);
    expect(ok.headers.location).toBe('/outbox/ui');
    const [cookie] = ok.headers['set-cookie'] as unknown as string[];
    expect(cookie).toMatch(/^outbox_session=\d{13}\.[\w-]{43}; Max-Age=43200; Path=\/outbox\/ui; /);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Strict');
    expect(cookie).not.toContain(OPERATOR_TOKEN);
    // Behind a proxy that sends its own Host: the page's origin is the forwarded host.
    await http()
      .post('/outbox/ui/login')
      .set('host', 'localhost:3000')
      .set('x-forwarded-host', '127.0.0.1:8443')
      .set('origin', 'https://127.0.0.1:8443')
      .set('x-forwarded-proto', 'https')
      .type('form')
      .send(`token=${encodeURIComponent(OPERATOR_TOKEN)}`)
      .expect(303)
      .then((proxied) =>
        expect((proxied.headers['set-cookie'] as unknown as string[])[0]).toContain('Secure'),
      );
    expect(cookie).not.toContain('Secure');
    const session = cookie.split(';')[0];
    await http().get('/outbox/ui').set('cookie', session).expect(200);
    // The session is the dashboard's: the operator API still wants the token.
    await http().get('/outbox').set('cookie', session).expect(401);
  });
});
