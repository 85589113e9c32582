import type { INestApplication } from '@nestjs/common';
import type { Client } from 'pg';
import request from 'supertest';
import { createReferenceApp } from '../support/reference-app';
import { createTestDatabase, type TestDatabase } from '../support/test-database';

/**
 * The API answers requests from its own pages and clients only: bodies are JSON (a browser
 * cannot post JSON across sites without a preflight), and a `Host` outside ALLOWED_HOSTS is
 * refused before any route, so a page on a rebound name reaches nothing.
 */

let db: TestDatabase;
let app: INestApplication;
let sql: Client;

const TABLES = ['organization', 'member', 'invoice', 'webhook_endpoint', 'outbox_event'];

beforeAll(async () => {
  db = await createTestDatabase();
  app = await createReferenceApp(db.url);
  sql = await db.connect();
});

afterAll(async () => {
  await app?.close();
  await db?.close();
});

function http() {
  return request(app.getHttpServer());
}

async function rowCounts(): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of TABLES) {
    const { rows } = await sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
    counts[table] = rows[0].n;
  }
  return counts;
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
    const before = await rowCounts();
    const res = await http().post('/organizations').type(type).send(body).expect(415);
    expect(res.body.message).toContain('must be JSON');
    expect(await rowCounts()).toEqual(before);
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
    'a request for Host %j is a 421 on every route, before any runs',
    async (host) => {
      const before = await rowCounts();
      for (const [method, path] of [
        ['get', '/health'],
        ['get', '/outbox/ui'],
        ['get', '/outbox'],
        ['get', '/no-such-route'],
        ['post', '/organizations'],
      ] as const) {
        const res = await http()[method](path).set('host', host).send({ name: 'x' });
        expect({ method, path, status: res.status }).toEqual({ method, path, status: 421 });
      }
      expect(await rowCounts()).toEqual(before);
    },
  );

  it('a page on a name rebound to 127.0.0.1 does not reach the dashboard', async () => {
    // The browser connects to 127.0.0.1 and names the page's host: the peer is loopback.
    const res = await http().get('/outbox/ui').set('host', 'rebound.evil.example:3000');
    expect(res.status).toBe(421);
    expect(res.text).not.toContain('Outbox');
  });

  it('a forwarded host outside the list is a 421 too', async () => {
    await http().get('/health').set('x-forwarded-host', 'evil.example').expect(421);
  });

  it.each([['localhost:3000'], ['127.0.0.1'], ['[::1]:8080'], ['LOCALHOST']])(
    'the loopback name %s is answered',
    async (host) => {
      const res = await http().get('/no-such-route').set('host', host);
      expect(res.status).toBe(404);
    },
  );

  it('ALLOWED_HOSTS replaces the loopback names', async () => {
    const other = await createReferenceApp(db.url, { ALLOWED_HOSTS: 'api.example.com' });
    try {
      const server = other.getHttpServer();
      await request(server).get('/no-such-route').set('host', 'api.example.com').expect(404);
      await request(server).get('/no-such-route').set('host', '127.0.0.1').expect(421);
    } finally {
      await other.close();
    }
  });
});
