import { Logger, type INestApplication } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { Client } from 'pg';
import request from 'supertest';
import { EventDispatcher, OUTBOX_EVENT_DEAD } from '@app/outbox';
import {
  MAILED_EVENT_TYPES,
  NOTIFIED_EVENT_TYPES,
  notificationDedupKey,
} from '../../apps/reference/src/notifications/notification-rules';
import { smtpMessageId } from '../../apps/reference/src/notifications/smtp.mailer';
import { forceRedelivery, waitUntilDelivered } from '../support/redelivery';
import { plantSecret } from '../support/log-guard';
import { createReferenceApp, OPERATOR, useReferenceApp } from '../support/reference-app';
import { bearer } from '../support/tenant';
import { MailerPort } from '../../apps/reference/src/notifications/mailer.port';
import { startSmtpServer, type TestSmtpServer } from '../support/smtp-server';
import { useTestApp } from '../support/test-database';
import { emitCommitted } from '../support/outbox-app';
import { deadAnnouncement } from '../support/events';

/**
 * The notification handlers: `notification-fanout` (transactional) writes in-app notifications
 * per the catalog's audience, `notification-mail` mails through the mailer port (a real SMTP
 * server, or the mail_log record), each once however often an event is delivered.
 */

/** The `Authorization` header of each organization created here, by id. */
const keys = new Map<string, { authorization: string }>();

function auth(organizationId: string): { authorization: string } {
  const header = keys.get(organizationId);
  if (!header) throw new Error(`no API key for ${organizationId}`);
  return header;
}

/** POSTs with the operator token to /organizations, with the organization's key elsewhere. */
async function post(app: INestApplication, path: string, body: object = {}): Promise<any> {
  const organizationId = /^\/organizations\/([^/]+)\//.exec(path)?.[1];
  const res = await request(app.getHttpServer())
    .post(path)
    .set(organizationId ? auth(organizationId) : OPERATOR)
    .send(body)
    .expect(201);
  if (path === '/organizations') keys.set(res.body.id, bearer(plantSecret(res.body.apiKey)));
  return res.body;
}

/** Creates an organization and its admin, then invites each of `invites` in order. */
async function organization(
  app: INestApplication,
  name: string,
  adminEmail: string,
  invites: { email: string; role: 'admin' | 'member' }[] = [],
) {
  const org = await post(app, '/organizations', { name, adminEmail });
  const invited: Record<string, { id: string; eventId: string }> = {};
  for (const invite of invites) {
    const member = await post(app, `/organizations/${org.id}/members`, invite);
    invited[invite.email] = { id: member.id, eventId: member.eventId };
  }
  return { id: org.id as string, adminId: org.adminId as string, invited };
}

/** Issues and pays one invoice; returns both event ids. */
async function issueAndPay(app: INestApplication, organizationId: string, number: string) {
  const issued = await post(app, `/organizations/${organizationId}/invoices`, {
    number,
    amountCents: 12_500,
    currency: 'EUR',
  });
  const paid = await post(app, `/organizations/${organizationId}/invoices/${issued.id}/pay`);
  return { issuedEventId: issued.eventId as string, paidEventId: paid.eventId as string };
}

async function notificationRows(sql: Client, organizationId: string) {
  const { rows } = await sql.query(
    `SELECT n.id, m.email, n.event_id, n.event_type, n.title, n.dedup_key, n.created_at
     FROM notification n JOIN member m ON m.id = n.user_id
     WHERE n.organization_id = $1 ORDER BY m.email, n.event_id`,
    [organizationId],
  );
  return rows;
}

async function mailLogRows(sql: Client) {
  const { rows } = await sql.query(`SELECT * FROM mail_log ORDER BY idempotency_key`);
  return rows;
}

async function inbox(app: INestApplication, organizationId: string, userId: string) {
  const res = await request(app.getHttpServer())
    .get('/notifications')
    .set(auth(organizationId))
    .query({ userId })
    .expect(200);
  return (res.body as { title: string }[]).map((n) => n.title).sort();
}

/** Every handler ran again: each of these events has `handler` in its deliveries. */
async function fanoutDelivered(
  sql: Client,
  eventIds: string[],
  handler = 'notification-fanout',
): Promise<number> {
  const { rows } = await sql.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM outbox_event
     WHERE id = ANY ($1::uuid[]) AND dispatched_at IS NOT NULL AND deliveries ? $2`,
    [eventIds, handler],
  );
  return rows[0].n;
}

describe('notification rules', () => {
  it('the fanout subscribes to every catalog type that notifies someone in-app, dead events included, and the mail handler to those that mail', () => {
    expect([...NOTIFIED_EVENT_TYPES].sort()).toEqual(
      ['invoice.issued', 'invoice.paid', 'member.invited', OUTBOX_EVENT_DEAD].sort(),
    );
    expect([...MAILED_EVENT_TYPES].sort()).toEqual(['invoice.paid', 'member.invited']);
  });

  it('the dedup key is the event id without a window, else type, aggregate and window number', () => {
    const event = {
      id: '0190a000-0000-7000-8000-000000000001',
      type: 'invoice.paid',
      aggregateId: 'inv-1',
      occurredAt: new Date(3_600_000 * 5 + 59_999),
    };
    expect(notificationDedupKey(event, {})).toBe(`event:${event.id}`);
    expect(notificationDedupKey(event, { dedupWindowMs: 60_000 })).toBe('invoice.paid:inv-1:300');
    const sameWindow = { ...event, id: randomUUID(), occurredAt: new Date(3_600_000 * 5) };
    expect(notificationDedupKey(sameWindow, { dedupWindowMs: 60_000 })).toBe(
      'invoice.paid:inv-1:300',
    );
    const nextWindow = { ...event, occurredAt: new Date(3_600_000 * 5 + 60_000) };
    expect(notificationDedupKey(nextWindow, { dedupWindowMs: 60_000 })).toBe(
      'invoice.paid:inv-1:301',
    );
  });
});

describe('notifications with a real SMTP server', () => {
  const SECRET = `pw-${randomUUID()}`;
  const MAIL_FROM = 'Acme Notifications <notify@acme.test>';
  let smtp: TestSmtpServer;
  const logged: string[] = [];

  beforeAll(async () => {
    // Everything the app logs through Nest's Logger, printed or not.
    for (const level of ['log', 'warn', 'error', 'debug', 'verbose', 'fatal'] as const) {
      jest.spyOn(Logger.prototype, level).mockImplementation(function (...args: unknown[]) {
        logged.push(args.map((a) => (a instanceof Error ? a.stack : String(a))).join(' '));
      });
    }
    smtp = await startSmtpServer({ users: { mailer: SECRET } });
  });

  const t = useTestApp((db) =>
    createReferenceApp(db.url, { SMTP_URL: smtp.url({ user: 'mailer', pass: SECRET }), MAIL_FROM }),
  );

  afterAll(async () => {
    await smtp?.close();
    jest.restoreAllMocks();
  });

  it('domain actions notify admins and members and mail the invitee and admins over SMTP, once even after a redelivery', async () => {
    const org = await organization(t.app, 'Acme', 'ada@acme.test', [
      { email: 'bob@acme.test', role: 'member' },
    ]);
    const bob = org.invited['bob@acme.test'];
    const { issuedEventId, paidEventId } = await issueAndPay(t.app, org.id, 'INV-1');
    await waitUntilDelivered(t.sql);

    // In-app: admins for member.invited and invoice.issued, every member for invoice.paid.
    expect(await inbox(t.app, org.id, org.adminId)).toEqual([
      'Invoice INV-1 issued',
      'Invoice INV-1 was paid',
      'bob@acme.test was invited as member',
    ]);
    expect(await inbox(t.app, org.id, bob.id)).toEqual(['Invoice INV-1 was paid']);
    const notifications = await notificationRows(t.sql, org.id);
    expect(notifications).toHaveLength(4);
    for (const n of notifications) expect(n.dedup_key).toBe(`event:${n.event_id}`);

    // Mail: the invitee for member.invited, the admins for invoice.paid; nothing else.
    const inviteKey = `notification-fanout:${bob.eventId}:bob@acme.test`;
    const paidKey = `notification-fanout:${paidEventId}:ada@acme.test`;
    const received = [...smtp.messages].sort((a, b) => a.to[0].localeCompare(b.to[0]));
    expect(
      received.map((m) => ({
        from: m.from,
        to: m.to,
        user: m.user,
        subject: m.headers['subject'],
        messageId: m.headers['message-id'],
      })),
    ).toEqual([
      {
        from: 'notify@acme.test',
        to: ['ada@acme.test'],
        user: 'mailer',
        subject: 'Invoice INV-1 was paid',
        messageId: smtpMessageId(paidKey, MAIL_FROM),
      },
      {
        from: 'notify@acme.test',
        to: ['bob@acme.test'],
        user: 'mailer',
        subject: 'bob@acme.test was invited as member',
        messageId: smtpMessageId(inviteKey, MAIL_FROM),
      },
    ]);
    expect(received[1].raw).toContain(`Event: member.invited ${bob.eventId}`);

    const mails = await request(t.app.getHttpServer()).get('/mails').set(auth(org.id)).expect(200);
    expect(
      (mails.body as any[])
        .map((m) => ({
          key: m.idempotencyKey,
          to: m.recipient,
          transport: m.transport,
          sent: m.sentAt !== null,
        }))
        .sort((a, b) => a.key.localeCompare(b.key)),
    ).toEqual(
      [
        { key: inviteKey, to: 'bob@acme.test', transport: 'smtp', sent: true },
        { key: paidKey, to: 'ada@acme.test', transport: 'smtp', sent: true },
      ].sort((a, b) => a.key.localeCompare(b.key)),
    );

    // Every event delivered again: the handler runs, inserts nothing and sends nothing.
    const mailLogBefore = await mailLogRows(t.sql);
    expect(await forceRedelivery(t.sql)).toBeGreaterThanOrEqual(4);
    await waitUntilDelivered(t.sql);
    expect(await fanoutDelivered(t.sql, [bob.eventId, issuedEventId, paidEventId])).toBe(3);
    expect(await fanoutDelivered(t.sql, [bob.eventId, paidEventId], 'notification-mail')).toBe(2);
    expect(await notificationRows(t.sql, org.id)).toEqual(notifications);
    expect(smtp.messages).toHaveLength(2);
    expect(await mailLogRows(t.sql)).toEqual(mailLogBefore);
  });

  it('a mail key another attempt is still sending is neither sent again nor given up', async () => {
    const mailer = t.app.get(MailerPort);
    const mail = {
      organizationId: randomUUID(),
      to: 'eve@acme.test',
      subject: 'S',
      text: 'T',
      idempotencyKey: 'test:in-flight',
    };
    await t.sql.query(
      `INSERT INTO mail_log (idempotency_key, recipient, subject, body, transport, claimed_at)
       VALUES ($1, $2, $3, $4, 'smtp', now())`,
      [mail.idempotencyKey, mail.to, mail.subject, mail.text],
    );
    const sentBefore = smtp.messages.length;
    await expect(mailer.send(mail)).rejects.toThrow('is being sent by another attempt');
    expect(smtp.messages).toHaveLength(sentBefore);

    // That attempt must have ended once its claim is older than every SMTP timeout.
    await t.sql.query(
      `UPDATE mail_log SET claimed_at = now() - interval '2 minutes' WHERE idempotency_key = $1`,
      [mail.idempotencyKey],
    );
    await expect(mailer.send(mail)).resolves.toBe('sent');
    await expect(mailer.send(mail)).resolves.toBe('duplicate');
    expect(smtp.messages).toHaveLength(sentBefore + 1);
  });

  it('logs where mail goes but never the SMTP credentials', () => {
    expect(logged.some((line) => line.includes(`SMTP at 127.0.0.1:${smtp.port}`))).toBe(true);
    expect(logged.filter((line) => line.includes(SECRET))).toEqual([]);
  });
});

describe('notifications without SMTP', () => {
  const t = useReferenceApp();

  it('records each mail in mail_log under its idempotency key, and a redelivery records none twice', async () => {
    const org = await organization(t.app, 'Initech', 'ada@initech.test', [
      { email: 'cy@initech.test', role: 'admin' },
      { email: 'bob@initech.test', role: 'member' },
    ]);
    const cy = org.invited['cy@initech.test'];
    const bob = org.invited['bob@initech.test'];
    const { paidEventId } = await issueAndPay(t.app, org.id, 'INV-7');
    await waitUntilDelivered(t.sql);

    const mails = await request(t.app.getHttpServer()).get('/mails').set(auth(org.id)).expect(200);
    const byKey = (a: { idempotencyKey: string }, b: { idempotencyKey: string }) =>
      a.idempotencyKey.localeCompare(b.idempotencyKey);
    expect(
      (mails.body as any[])
        .map((m) => ({
          idempotencyKey: m.idempotencyKey,
          recipient: m.recipient,
          subject: m.subject,
          transport: m.transport,
          sent: m.sentAt !== null,
        }))
        .sort(byKey),
    ).toEqual(
      [
        {
          idempotencyKey: `notification-fanout:${cy.eventId}:cy@initech.test`,
          recipient: 'cy@initech.test',
          subject: 'cy@initech.test was invited as admin',
          transport: 'recorded',
          sent: true,
        },
        {
          idempotencyKey: `notification-fanout:${bob.eventId}:bob@initech.test`,
          recipient: 'bob@initech.test',
          subject: 'bob@initech.test was invited as member',
          transport: 'recorded',
          sent: true,
        },
        {
          idempotencyKey: `notification-fanout:${paidEventId}:ada@initech.test`,
          recipient: 'ada@initech.test',
          subject: 'Invoice INV-7 was paid',
          transport: 'recorded',
          sent: true,
        },
        {
          idempotencyKey: `notification-fanout:${paidEventId}:cy@initech.test`,
          recipient: 'cy@initech.test',
          subject: 'Invoice INV-7 was paid',
          transport: 'recorded',
          sent: true,
        },
      ].sort(byKey),
    );
    // Newest first.
    const created = (mails.body as any[]).map((m) => Date.parse(m.createdAt));
    expect(created).toEqual([...created].sort((a, b) => b - a));

    // Both admins see every admin notification (cy counts for her own invitation: she was a
    // member as of that event); bob only the payment.
    const adminTitles = [
      'Invoice INV-7 issued',
      'Invoice INV-7 was paid',
      'bob@initech.test was invited as member',
      'cy@initech.test was invited as admin',
    ];
    expect(await inbox(t.app, org.id, org.adminId)).toEqual(adminTitles);
    expect(await inbox(t.app, org.id, cy.id)).toEqual(adminTitles);
    expect(await inbox(t.app, org.id, bob.id)).toEqual(['Invoice INV-7 was paid']);

    const notifications = await notificationRows(t.sql, org.id);
    const mailLog = await mailLogRows(t.sql);
    expect(await forceRedelivery(t.sql)).toBeGreaterThanOrEqual(5);
    await waitUntilDelivered(t.sql);
    expect(await fanoutDelivered(t.sql, [cy.eventId, bob.eventId, paidEventId])).toBe(3);
    expect(await notificationRows(t.sql, org.id)).toEqual(notifications);
    expect(await mailLogRows(t.sql)).toEqual(mailLog);
  });

  it('an outbox.event.dead for the organization notifies its admins exactly once, also after a redelivery', async () => {
    const org = await organization(t.app, 'Globex', 'gina@globex.test', [
      { email: 'hal@globex.test', role: 'admin' },
      { email: 'ian@globex.test', role: 'member' },
    ]);
    await waitUntilDelivered(t.sql);
    const mailsBefore = await mailLogRows(t.sql);

    const failed = deadAnnouncement(
      {
        eventId: randomUUID(),
        type: 'invoice.paid',
        aggregateType: 'invoice',
        handler: 'webhook-fanout',
        error: 'HTTP 500',
      },
      { organizationId: org.id },
    );
    const deadEventId = await emitCommitted(t.app, failed);
    await waitUntilDelivered(t.sql);

    const deadNotifications = async () => {
      const { rows } = await t.sql.query(
        `SELECT n.id, m.email, n.organization_id, n.title, n.dedup_key
         FROM notification n JOIN member m ON m.id = n.user_id
         WHERE n.event_type = $1 ORDER BY m.email`,
        [OUTBOX_EVENT_DEAD],
      );
      return rows;
    };
    const title = `Delivery of invoice.paid ${failed.payload.eventId} failed for good`;
    const first = await deadNotifications();
    expect(first.map(({ id: _id, ...rest }) => rest)).toEqual(
      ['gina@globex.test', 'hal@globex.test'].map((email) => ({
        email,
        organization_id: org.id,
        title,
        dedup_key: `event:${deadEventId}`,
      })),
    );
    expect(await inbox(t.app, org.id, org.invited['ian@globex.test'].id)).toEqual([]);
    expect(await mailLogRows(t.sql)).toEqual(mailsBefore);

    expect(await forceRedelivery(t.sql, [deadEventId])).toBe(1);
    await waitUntilDelivered(t.sql);
    expect(await fanoutDelivered(t.sql, [deadEventId])).toBe(1);
    expect(await deadNotifications()).toEqual(first);
    expect(await mailLogRows(t.sql)).toEqual(mailsBefore);
  });

  it('GET /notifications wants an API key and a UUID userId, and the handler is registered only for notified types', async () => {
    const org = await organization(t.app, 'Hooli', 'gavin@hooli.test');
    const key = auth(org.id);
    await request(t.app.getHttpServer()).get('/notifications').expect(401);
    await request(t.app.getHttpServer()).get('/mails').expect(401);
    const res = await request(t.app.getHttpServer())
      .get('/notifications')
      .set(key)
      .query({ userId: 'nope' })
      .expect(400);
    expect(JSON.stringify(res.body.message)).toContain('userId must be a UUID');
    const registry = t.app.get(EventDispatcher);
    expect(registry.handlerNames('invoice.paid')).toContain('notification-fanout');
    expect(registry.handlerNames(OUTBOX_EVENT_DEAD)).toContain('notification-fanout');
    expect(registry.handlerNames('organization.created')).not.toContain('notification-fanout');
    expect(registry.handlerNames('invoice.paid')).toContain('notification-mail');
    expect(registry.handlerNames('invoice.issued')).not.toContain('notification-mail');
  });
});
