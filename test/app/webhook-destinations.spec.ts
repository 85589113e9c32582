import type { INestApplication } from '@nestjs/common';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { scrubError } from '@app/outbox';
import { eventually } from '../support/outbox-app';
import { waitUntilDelivered } from '../support/redelivery';
import { createReferenceApp } from '../support/reference-app';
import { createTenant, type Tenant } from '../support/tenant';
import { useTestDatabase } from '../support/test-database';
import { webhookDeliveries } from '../support/webhook-deliveries';
import { WebhookReceiver } from '../support/webhook-receiver';

/**
 * The webhook sender cannot be aimed inside: an endpoint on a loopback, private, link-local,
 * CGNAT, unique-local, multicast or unspecified address (or a name resolving to one) is refused
 * at registration, and the address actually dialled is checked again at each POST, so a name
 * that resolves elsewhere later reaches nothing. Of a failing answer, 300 bytes are read.
 */

const t = useTestDatabase();
let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await WebhookReceiver.start();
});

afterAll(async () => {
  await receiver?.close();
});

async function endpointCount(organizationId: string): Promise<number> {
  const { rows } = await t.sql.query(
    'SELECT count(*)::int AS n FROM webhook_endpoint WHERE organization_id = $1',
    [organizationId],
  );
  return rows[0].n;
}

describe('registration', () => {
  let app: INestApplication;
  let tenant: Tenant;

  beforeAll(async () => {
    app = await createReferenceApp(t.db.url);
    tenant = await createTenant(app.getHttpServer(), 'Registrar');
  });

  afterAll(async () => {
    await app?.close();
  });

  function register(url: string) {
    return request(app.getHttpServer())
      .post(`/organizations/${tenant.id}/webhooks`)
      .set(tenant.auth)
      .send({ url, events: ['invoice.paid'] });
  }

  it.each([
    ['http://127.0.0.1:9/hook', '127.0.0.1 is a loopback address'],
    ['http://127.1.2.3/hook', '127.1.2.3 is a loopback address'],
    ['http://[::1]:9/hook', '::1 is a loopback address'],
    ['http://[::ffff:127.0.0.1]/hook', '::ffff:7f00:1 is a loopback address'],
    ['http://10.0.0.5/hook', '10.0.0.5 is a private address'],
    ['http://172.16.0.1/hook', '172.16.0.1 is a private address'],
    ['http://192.168.1.1/hook', '192.168.1.1 is a private address'],
    ['http://169.254.169.254/latest/meta-data', '169.254.169.254 is a linkLocal address'],
    ['http://[fe80::1]/hook', 'fe80::1 is a linkLocal address'],
    ['http://100.64.0.1/hook', '100.64.0.1 is a carrierGradeNat address'],
    ['http://[fd12:3456::1]/hook', 'fd12:3456::1 is a uniqueLocal address'],
    ['http://224.0.0.1/hook', '224.0.0.1 is a multicast address'],
    ['http://[ff02::1]/hook', 'ff02::1 is a multicast address'],
    ['http://0.0.0.0/hook', '0.0.0.0 is a unspecified address'],
    ['http://[::]/hook', ':: is a unspecified address'],
    ['http://[::127.0.0.1]/hook', '::7f00:1 is a IPv4-compatible address'],
    ['http://[64:ff9b:1::a00:1]/hook', '64:ff9b:1::a00:1 is a local-use NAT64 address'],
  ])('%s is a 400 naming url, and nothing is written', async (url, reason) => {
    const res = await register(url).expect(400);
    expect(res.body.message).toEqual([`url must be a public address: ${reason}`]);
    expect(await endpointCount(tenant.id)).toBe(0);
  });

  it('a name that resolves to loopback (localhost) is a 400 naming url', async () => {
    const res = await register(
      `${receiver.url('/hooks/localhost').replace('127.0.0.1', 'localhost')}`,
    ).expect(400);
    expect(res.body.message).toEqual([
      expect.stringMatching(
        /^url must be a public address: localhost resolves to a loopback address$/,
      ),
    ]);
    expect(await endpointCount(tenant.id)).toBe(0);
  });

  it('a name that does not resolve is a 400 naming url', async () => {
    const res = await register('https://no-such-host.invalid/hook').expect(400);
    expect(res.body.message).toEqual([expect.stringMatching(/^url host does not resolve/)]);
    expect(await endpointCount(tenant.id)).toBe(0);
  });

  it('a public address is accepted, up to 10 endpoints per organization', async () => {
    const capped = await createTenant(app.getHttpServer(), 'Capped');
    const add = (i: number) =>
      request(app.getHttpServer())
        .post(`/organizations/${capped.id}/webhooks`)
        .set(capped.auth)
        .send({ url: `https://93.184.215.14/hooks/${i}`, events: ['invoice.paid'] });
    // Concurrently: the cap holds when registrations race.
    const statuses = (await Promise.all(Array.from({ length: 12 }, (_, i) => add(i)))).map(
      (res) => res.status,
    );
    expect(statuses.filter((s) => s === 201)).toHaveLength(10);
    expect(statuses.filter((s) => s === 409)).toHaveLength(2);
    expect(await endpointCount(capped.id)).toBe(10);
    const refused = await add(99).expect(409);
    expect(refused.body.message).toBe(
      'the organization has 10 webhook endpoints, the most it may have',
    );
    // Another organization has its own ten.
    await register('https://93.184.215.14/hooks/other').expect(201);
  });
});

describe('sending', () => {
  it('an endpoint whose address is inside by the time of the POST is refused when dialled, and nothing reaches it', async () => {
    // Registered where local addresses were allowed...
    const before = await createReferenceApp(t.db.url, { WEBHOOK_ALLOW_PRIVATE_ADDRESSES: '1' });
    const tenant = await createTenant(before.getHttpServer(), 'Moved');
    const byName = receiver.url('/hooks/by-name').replace('127.0.0.1', 'localhost');
    for (const url of [byName, receiver.url('/hooks/by-address')]) {
      await request(before.getHttpServer())
        .post(`/organizations/${tenant.id}/webhooks`)
        .set(tenant.auth)
        .send({ url, events: ['member.invited'] })
        .expect(201);
    }
    await before.close();

    // ...and sent where they are not: each POST checks the address it would dial.
    const app = await createReferenceApp(t.db.url, { WEBHOOK_RETRY_SCHEDULE_MS: '50' });
    try {
      const invite = await request(app.getHttpServer())
        .post(`/organizations/${tenant.id}/members`)
        .set(tenant.auth)
        .send({ email: 'bob@moved.test', role: 'member' })
        .expect(201);
      await waitUntilDelivered(t.sql);
      const rows = await webhookDeliveries(t.sql, { eventId: invite.body.eventId });
      const tries = rows.map((r) => [r.attempts, r.dead_at !== null, r.last_error]);
      expect(tries).toHaveLength(2);
      expect(tries).toEqual(
        expect.arrayContaining([
          [
            2,
            true,
            expect.stringMatching(
              /refused: localhost resolves to a loopback address, and WEBHOOK_ALLOW_PRIVATE_ADDRESSES is off$/,
            ),
          ],
          [
            2,
            true,
            expect.stringMatching(
              /refused: 127\.0\.0\.1 is a loopback address, and WEBHOOK_ALLOW_PRIVATE_ADDRESSES is off$/,
            ),
          ],
        ]),
      );
      expect(receiver.requestsTo('/hooks/by-name')).toEqual([]);
      expect(receiver.requestsTo('/hooks/by-address')).toEqual([]);
    } finally {
      await app.close();
    }
  });

  it('reads 300 bytes of a 500 MB failing answer, cancels the rest, and memory stays bounded', async () => {
    const TOTAL = 500 * 1024 * 1024;
    const prefix = '\u001b[31mdisk full\r\nat /var/lib/db ';
    const chunk = Buffer.alloc(64 * 1024, 'x');
    let written = 0;
    let closed = false;
    const flood: Server = createServer((req, res) => {
      req.resume();
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.on('close', () => (closed = true));
      res.write(prefix);
      const pump = () => {
        while (written < TOTAL && !res.destroyed) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    });
    await new Promise<void>((done) => flood.listen(0, '127.0.0.1', done));
    const url = `http://127.0.0.1:${(flood.address() as AddressInfo).port}/hook`;

    // One try, with all the time in the world to read whatever it is sent.
    const app = await createReferenceApp(t.db.url, {
      WEBHOOK_ALLOW_PRIVATE_ADDRESSES: '1',
      WEBHOOK_TIMEOUT_MS: '50000',
      WEBHOOK_RETRY_SCHEDULE_MS: '3600000',
    });
    const baseline = process.memoryUsage().rss;
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
    try {
      const tenant = await createTenant(app.getHttpServer(), 'Flooded');
      await request(app.getHttpServer())
        .post(`/organizations/${tenant.id}/webhooks`)
        .set(tenant.auth)
        .send({ url, events: ['member.invited'] })
        .expect(201);
      const invite = await request(app.getHttpServer())
        .post(`/organizations/${tenant.id}/members`)
        .set(tenant.auth)
        .send({ email: 'bob@flooded.test', role: 'member' })
        .expect(201);
      let lastError: string | null = null;
      await eventually('the failed try is recorded', async () => {
        const [row] = await webhookDeliveries(t.sql, { eventId: invite.body.eventId });
        lastError = row?.last_error ?? null;
        return lastError !== null;
      });
      await eventually('the endpoint sees its answer cut off', () => closed);

      const first300 = Buffer.concat([Buffer.from(prefix), chunk])
        .subarray(0, 300)
        .toString();
      const expected = `webhook-sender: WebhookAttemptError: ${scrubError(`HTTP 500: ${first300.trim()}`)}`;
      expect(lastError).toBe(expected);
      // Control characters are escaped, never raw.
      expect(lastError).toContain('\\u001b[31mdisk full\\u000d\\u000aat');
      expect([...lastError!].some((c) => c.charCodeAt(0) < 0x20)).toBe(false);
      // What the tenant reads is the same line.
      const listing = await request(app.getHttpServer())
        .get('/webhooks/deliveries')
        .set(tenant.auth)
        .expect(200);
      expect(listing.body[0].lastError).toBe(expected);

      // The rest was never read: far less than the body was sent, and memory did not follow it.
      expect(written).toBeLessThan(64 * 1024 * 1024);
      expect(peak - baseline).toBeLessThan(100 * 1024 * 1024);
    } finally {
      clearInterval(sampler);
      await app.close();
      flood.closeAllConnections();
      await new Promise<void>((done) => flood.close(() => done()));
    }
  });
});
