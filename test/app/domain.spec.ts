import { BadRequestException } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { DomainEvents } from '../../apps/reference/src/events/domain-events';
import request from 'supertest';
import { plantSecret } from '../support/log-guard';
import { useReferenceApp, OPERATOR } from '../support/reference-app';
import { bearer } from '../support/tenant';
import { eventually } from '../support/outbox-app';

/** The domain API: each action writes its change and its event together, or nothing. */

const t = useReferenceApp();

async function count(table: string): Promise<number> {
  const { rows } = await t.sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`);
  return rows[0].n;
}

describe('reference app domain', () => {
  it('creating an organization writes it, its admin and organization.created with the request id', async () => {
    const res = await request(t.app.getHttpServer())
      .post('/organizations')
      .set(OPERATOR)
      .set('x-request-id', 'req-create-1')
      .send({ name: 'Acme', adminEmail: 'Ada@Acme.test' })
      .expect(201);
    expect(res.headers['x-request-id']).toBe('req-create-1');
    const { rows } = await t.sql.query(
      'SELECT type, organization_id, request_id, aggregate_type, payload FROM outbox_event WHERE id = $1',
      [res.body.eventId],
    );
    expect(rows).toEqual([
      {
        type: 'organization.created',
        organization_id: res.body.id,
        request_id: 'req-create-1',
        aggregate_type: 'organization',
        payload: { organizationId: res.body.id, name: 'Acme' },
      },
    ]);
    await eventually('the event is delivered', async () => {
      const r = await t.sql.query('SELECT dispatched_at FROM outbox_event WHERE id = $1', [
        res.body.eventId,
      ]);
      return r.rows[0].dispatched_at !== null;
    });
  });

  it('a payload that fails validation gets a 400 naming the field, and nothing is written', async () => {
    const org = await request(t.app.getHttpServer())
      .post('/organizations')
      .set(OPERATOR)
      .send({ name: 'Beta', adminEmail: 'bo@beta.test' })
      .expect(201);
    const key = bearer(plantSecret(org.body.apiKey));
    const before = { invoices: await count('invoice'), events: await count('outbox_event') };
    const res = await request(t.app.getHttpServer())
      .post(`/organizations/${org.body.id}/invoices`)
      .set(key)
      .send({ number: 'INV-1', amountCents: -5, currency: 'EUR' })
      .expect(400);
    expect(JSON.stringify(res.body.message)).toContain('amountCents must not be less than 1');
    const bad = await request(t.app.getHttpServer())
      .post(`/organizations/${org.body.id}/members`)
      .set(key)
      .send({ email: 'not-an-email', role: 'owner' })
      .expect(400);
    expect(JSON.stringify(bad.body.message)).toContain('email must be an email');
    expect(JSON.stringify(bad.body.message)).toContain(
      'role must be one of the following values: admin, member',
    );
    expect({ invoices: await count('invoice'), events: await count('outbox_event') }).toEqual(
      before,
    );
  });

  it('an event payload that does not match the catalog is a 400 naming the field, and nothing is written', async () => {
    const events = t.app.get(DomainEvents);
    const dataSource = t.app.get(DataSource);
    const before = await count('outbox_event');
    const error = await dataSource
      .transaction((manager) =>
        events.emit(manager, {
          type: 'invoice.paid',
          aggregateType: 'invoice',
          aggregateId: 'inv-x',
          organizationId: '00000000-0000-4000-8000-000000000000',
          requestId: 'req-x',
          payload: { invoiceId: 'not-a-uuid', number: 'INV-9', amountCents: 0, currency: 'EUR' },
        }),
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BadRequestException);
    const messages = JSON.stringify((error as BadRequestException).getResponse());
    expect(messages).toContain('payload.invoiceId: invoiceId must be a UUID');
    expect(messages).toContain('payload.amountCents: amountCents must not be less than 1');
    expect(await count('outbox_event')).toBe(before);
  });

  it('two invites of one address racing past the existence check give one member and one 409', async () => {
    const org = await request(t.app.getHttpServer())
      .post('/organizations')
      .set(OPERATOR)
      .send({ name: 'Race', adminEmail: 'ra@race.test' })
      .expect(201);
    const key = bearer(plantSecret(org.body.apiKey));
    const invite = () =>
      request(t.app.getHttpServer())
        .post(`/organizations/${org.body.id}/members`)
        .set(key)
        .send({ email: 'twin@race.test', role: 'member' });
    const statuses = (await Promise.all([invite(), invite(), invite()]))
      .map((r) => r.status)
      .sort();
    expect(statuses).toEqual([201, 409, 409]);
    const { rows } = await t.sql.query(
      `SELECT count(*)::int AS n FROM member WHERE organization_id = $1 AND email = 'twin@race.test'`,
      [org.body.id],
    );
    expect(rows[0].n).toBe(1);
  });

  it("GET /outbox reports the engine's state and the outbox by state, from the health indicator's bounded probe", async () => {
    const res = await request(t.app.getHttpServer()).get('/outbox').set(OPERATOR).expect(200);
    expect(res.body).toEqual({
      dispatcher: 'running',
      listener: expect.any(String),
      lagMs: expect.any(Number),
      due: expect.any(Number),
      retrying: expect.any(Number),
      inFlight: expect.any(Number),
      expiredLeases: expect.any(Number),
      dead: expect.any(Number),
      countLimit: 1000,
    });
  });
});
