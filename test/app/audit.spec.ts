import { randomUUID } from 'node:crypto';
import type { Client } from 'pg';
import request from 'supertest';
import { OUTBOX_EVENT_DEAD, type OutboxEvent } from '@app/outbox';
import { AuditLogHandler } from '../../apps/reference/src/audit/audit-log.handler';
import { GENESIS_HASH, chainHash } from '../../apps/reference/src/audit/audit-chain';
import { emitCommitted, eventually } from '../support/outbox-app';
import { deadAnnouncement } from '../support/events';
import { forceRedelivery, waitUntilDelivered } from '../support/redelivery';
import { plantSecret } from '../support/log-guard';
import { useReferenceApp, OPERATOR } from '../support/reference-app';
import { bearer } from '../support/tenant';

/**
 * The audit log: one hash-chained entry per event of every type, written once however often
 * the event is delivered, and a verifier that finds the first entry someone changed.
 */

interface AuditRow {
  event_id: string;
  seq: number;
  event_type: string;
  aggregate_type: string;
  aggregate_id: string;
  organization_id: string | null;
  request_id: string | null;
  occurred_at: Date;
  payload: unknown;
  prev_hash: string;
  hash: string;
}

async function auditRows(sql: Client): Promise<AuditRow[]> {
  const { rows } = await sql.query<AuditRow>(
    `SELECT event_id, seq::int AS seq, event_type, aggregate_type, aggregate_id, organization_id,
            request_id, occurred_at, payload, prev_hash, hash
     FROM audit_entry ORDER BY seq`,
  );
  return rows;
}

async function outboxEventIds(sql: Client): Promise<string[]> {
  const { rows } = await sql.query<{ id: string }>('SELECT id FROM outbox_event ORDER BY id');
  return rows.map((row) => row.id);
}

/** Every outbox event has exactly one entry, and nothing else does; seq runs 1..n. */
async function expectOneEntryPerEvent(sql: Client): Promise<AuditRow[]> {
  const rows = await auditRows(sql);
  expect(rows.map((row) => row.event_id).sort()).toEqual(await outboxEventIds(sql));
  expect(rows.map((row) => row.seq)).toEqual(rows.map((_, i) => i + 1));
  return rows;
}

function rehash(row: AuditRow, payload: unknown = row.payload): string {
  return chainHash(row.prev_hash, {
    eventId: row.event_id,
    type: row.event_type,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    organizationId: row.organization_id,
    requestId: row.request_id,
    occurredAt: row.occurred_at.toISOString(),
    payload,
    seq: row.seq,
  });
}

describe('audit log', () => {
  const t = useReferenceApp();

  const http = () => request(t.app.getHttpServer());

  async function verify(): Promise<Record<string, unknown>> {
    return (await http().get('/audit/verify').set(OPERATOR).expect(200)).body;
  }

  const keys = new Map<string, { authorization: string }>();
  const auth = (organizationId: string) => keys.get(organizationId)!;

  async function createOrganization(name: string, requestId = `req-${randomUUID()}`) {
    const res = await http()
      .post('/organizations')
      .set(OPERATOR)
      .set('x-request-id', requestId)
      .send({ name, adminEmail: `admin@${name.toLowerCase()}.test` })
      .expect(201);
    keys.set(res.body.id, bearer(plantSecret(res.body.apiKey)));
    return res.body as { id: string; eventId: string };
  }

  let orgId: string;
  let inviteEventId: string;

  it('every domain action leads to exactly one entry per event, chained from the genesis hash', async () => {
    expect(await verify()).toEqual({ valid: true, entries: 0 });

    const org = await createOrganization('Acme', 'req-audit-org');
    orgId = org.id;
    const invite = await http()
      .post(`/organizations/${org.id}/members`)
      .set(auth(org.id))
      .set('x-request-id', 'req-audit-invite')
      .send({ email: 'bob@acme.test', role: 'member' })
      .expect(201);
    inviteEventId = invite.body.eventId;
    const issued = await http()
      .post(`/organizations/${org.id}/invoices`)
      .set(auth(org.id))
      .set('x-request-id', 'req-audit-issue')
      .send({ number: 'INV-1', amountCents: 1200, currency: 'EUR' })
      .expect(201);
    const paid = await http()
      .post(`/organizations/${org.id}/invoices/${issued.body.id}/pay`)
      .set(auth(org.id))
      .set('x-request-id', 'req-audit-pay')
      .expect(201);
    await waitUntilDelivered(t.sql);

    const rows = await expectOneEntryPerEvent(t.sql);
    const byEvent = new Map(rows.map((row) => [row.event_id, row]));
    const { rows: events } = await t.sql.query(
      `SELECT id, type, aggregate_type, aggregate_id, organization_id, request_id, payload
       FROM outbox_event`,
    );
    expect(events.map((e) => e.type).sort()).toEqual([
      'invoice.issued',
      'invoice.paid',
      'member.invited',
      'organization.created',
    ]);
    for (const event of events) {
      expect(byEvent.get(event.id)).toMatchObject({
        event_type: event.type,
        aggregate_type: event.aggregate_type,
        aggregate_id: event.aggregate_id,
        organization_id: event.organization_id,
        request_id: event.request_id,
        payload: event.payload,
      });
    }
    expect(byEvent.get(org.eventId)).toMatchObject({
      event_type: 'organization.created',
      organization_id: org.id,
      request_id: 'req-audit-org',
      payload: { organizationId: org.id, name: 'Acme' },
    });
    expect(byEvent.get(paid.body.eventId)).toMatchObject({
      event_type: 'invoice.paid',
      aggregate_id: issued.body.id,
      request_id: 'req-audit-pay',
    });

    // Each entry links to the one before it, and its hash covers its own content.
    expect(rows[0].prev_hash).toBe(GENESIS_HASH);
    rows.forEach((row, i) => {
      if (i > 0) expect(row.prev_hash).toBe(rows[i - 1].hash);
      expect(row.hash).toMatch(/^[0-9a-f]{64}$/);
      expect(row.hash).toBe(rehash(row));
    });
    expect(await verify()).toEqual({ valid: true, entries: 4 });
  });

  it("GET /audit lists the key's organization's entries newest first, and no other's", async () => {
    const other = await createOrganization('Other');
    await waitUntilDelivered(t.sql);

    const theirs = (await http().get('/audit').set(auth(other.id)).expect(200)).body.entries;
    expect(theirs).toEqual([
      expect.objectContaining({
        eventId: other.eventId,
        type: 'organization.created',
        organizationId: other.id,
        payload: { organizationId: other.id, name: 'Other' },
      }),
    ]);

    // Acme's events were handled concurrently, so their relative order is completion order.
    const acme = (await http().get('/audit').set(auth(orgId)).expect(200)).body.entries;
    expect(acme.map((e: { type: string }) => e.type).sort()).toEqual([
      'invoice.issued',
      'invoice.paid',
      'member.invited',
      'organization.created',
    ]);
    const acmeSeqs = acme.map((e: { seq: number }) => e.seq);
    expect(acmeSeqs).toEqual([...acmeSeqs].sort((a, b) => b - a));
    expect(new Set(acme.map((e: { organizationId: string }) => e.organizationId))).toEqual(
      new Set([orgId]),
    );

    const limited = (await http().get('/audit').set(auth(orgId)).query({ limit: 2 }).expect(200))
      .body.entries;
    expect(limited.map((e: { seq: number }) => e.seq)).toEqual(acmeSeqs.slice(0, 2));
    // The organization is the key's: naming another is not a filter any more.
    await http().get('/audit').set(auth(orgId)).query({ organizationId: other.id }).expect(400);
    await http().get('/audit').set(auth(orgId)).query({ limit: 0 }).expect(400);
    await http().get('/audit').expect(401);
    // The chain runs through every organization: an organization's key does not verify it.
    await http().get('/audit/verify').set(auth(orgId)).expect(401);
  });

  it('events handled concurrently are appended to one valid chain', async () => {
    await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        http()
          .post(`/organizations/${orgId}/invoices`)
          .set(auth(orgId))
          .send({ number: `BULK-${i}`, amountCents: 100 + i, currency: 'USD' })
          .expect(201),
      ),
    );
    await waitUntilDelivered(t.sql);
    const rows = await expectOneEntryPerEvent(t.sql);
    expect(await verify()).toEqual({ valid: true, entries: rows.length });
  });

  it('a forced redelivery writes no second entry and the chain stays valid', async () => {
    const before = await auditRows(t.sql);
    expect(await forceRedelivery(t.sql)).toBe(before.length);
    await waitUntilDelivered(t.sql);

    // The handler did run again for every event (its delivery was erased), and wrote nothing.
    const { rows } = await t.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM outbox_event WHERE NOT deliveries ? 'audit-log'`,
    );
    expect(rows[0].n).toBe(0);
    expect(await auditRows(t.sql)).toEqual(before);
    expect(await verify()).toEqual({ valid: true, entries: before.length });
  });

  function specEvent(n: number): OutboxEvent {
    return {
      id: randomUUID(),
      type: 'audit.spec.direct',
      aggregateType: 'spec',
      aggregateId: `direct-${n}`,
      organizationId: null,
      requestId: null,
      payload: { n },
      metadata: {},
      occurredAt: new Date(),
      causationId: null,
      correlationId: null,
      orderingKey: `spec:direct-${n}`,
    };
  }

  it('concurrent appends of different events take consecutive seqs under the chain lock', async () => {
    const handler = t.app.get(AuditLogHandler);
    const before = (await auditRows(t.sql)).length;
    // Without the lock they would read the same last entry and collide on seq.
    const seqs = await Promise.all(
      Array.from({ length: 8 }, (_, i) => handler.append(specEvent(i))),
    );
    expect([...seqs].sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual(
      Array.from({ length: 8 }, (_, i) => before + 1 + i),
    );
    expect(await verify()).toEqual({ valid: true, entries: before + 8 });
  });

  it('concurrent deliveries of one event append it once', async () => {
    const handler = t.app.get(AuditLogHandler);
    const event = specEvent(100);
    const before = (await auditRows(t.sql)).length;
    const seqs = await Promise.all(Array.from({ length: 6 }, () => handler.append(event)));
    expect(seqs.filter((seq) => seq !== null)).toEqual([before + 1]);
    const { rows } = await t.sql.query(
      'SELECT seq::int AS seq FROM audit_entry WHERE event_id = $1',
      [event.id],
    );
    expect(rows).toEqual([{ seq: before + 1 }]);
    expect(await handler.append(event)).toBeNull();
    expect(await verify()).toEqual({ valid: true, entries: before + 1 });
  });

  it('an outbox.event.dead announcement is audited like any event', async () => {
    const announcement = deadAnnouncement(
      {
        eventId: inviteEventId,
        type: 'member.invited',
        aggregateType: 'member',
        handler: 'some-handler',
        error: 'Error: boom',
      },
      { organizationId: orgId, requestId: 'req-audit-invite' },
    );
    const deadId = await emitCommitted(t.app, announcement);
    await waitUntilDelivered(t.sql);

    const entries = (await http().get('/audit').set(auth(orgId)).expect(200)).body.entries;
    expect(entries[0]).toMatchObject({
      eventId: deadId,
      type: OUTBOX_EVENT_DEAD,
      aggregateType: 'outbox_event',
      aggregateId: inviteEventId,
      payload: announcement.payload,
    });
    const rows = await auditRows(t.sql);
    expect(rows.filter((row) => row.event_id === deadId)).toHaveLength(1);
    expect(await verify()).toEqual({ valid: true, entries: rows.length });
  });

  it('a changed payload is reported at its seq, a rehashed one at the next seq', async () => {
    const rows = await auditRows(t.sql);
    const target = rows[2];
    const next = rows[3];
    const tampered = { ...(target.payload as object), tampered: true };

    await t.sql.query('UPDATE audit_entry SET payload = $2 WHERE event_id = $1', [
      target.event_id,
      JSON.stringify(tampered),
    ]);
    expect(await verify()).toEqual({
      valid: false,
      entries: rows.length,
      firstBrokenSeq: 3,
      eventId: target.event_id,
      reason: 'hash does not match the entry content',
    });

    // Rehashing the changed entry hides it from its own check, but not from its successor's.
    await t.sql.query('UPDATE audit_entry SET hash = $2 WHERE event_id = $1', [
      target.event_id,
      rehash(target, tampered),
    ]);
    expect(await verify()).toEqual({
      valid: false,
      entries: rows.length,
      firstBrokenSeq: 4,
      eventId: next.event_id,
      reason: 'prev_hash does not match the hash of entry 3',
    });

    // A removed entry shows as a gap.
    await t.sql.query('UPDATE audit_entry SET payload = $2, hash = $3 WHERE event_id = $1', [
      target.event_id,
      JSON.stringify(target.payload),
      target.hash,
    ]);
    expect(await verify()).toEqual({ valid: true, entries: rows.length });
    await t.sql.query('DELETE FROM audit_entry WHERE event_id = $1', [next.event_id]);
    expect(await verify()).toMatchObject({
      valid: false,
      entries: rows.length - 1,
      firstBrokenSeq: 5,
      eventId: rows[4].event_id,
    });
  });
});

describe('audit log when a delivery fails for good', () => {
  // One attempt makes the first failure final; a dead event is replayed after 3.6 s.
  const t = useReferenceApp({ OUTBOX_MAX_ATTEMPTS: '1', OUTBOX_DEAD_RETRY_HOURS: '0.001' });

  it('audits the outbox.event.dead announcement, then the event itself once its replay succeeds', async () => {
    const http = () => request(t.app.getHttpServer());
    const org = await http()
      .post('/organizations')
      .set(OPERATOR)
      .send({ name: 'Doomed', adminEmail: 'admin@doomed.test' })
      .expect(201);
    const key = bearer(plantSecret(org.body.apiKey));
    await waitUntilDelivered(t.sql);

    // The audit insert of member.invited now fails, so its only attempt fails.
    await t.sql.query(
      `ALTER TABLE audit_entry ADD CONSTRAINT audit_spec_refuses_invites
       CHECK (event_type <> 'member.invited')`,
    );
    const invite = await http()
      .post(`/organizations/${org.body.id}/members`)
      .set(key)
      .send({ email: 'eve@doomed.test', role: 'member' })
      .expect(201);
    const inviteId: string = invite.body.eventId;

    let announcementId = '';
    await eventually('the dead announcement is audited', async () => {
      const { rows } = await t.sql.query<{ event_id: string }>(
        `SELECT event_id FROM audit_entry
         WHERE event_type = $1 AND payload->>'eventId' = $2`,
        [OUTBOX_EVENT_DEAD, inviteId],
      );
      announcementId = rows[0]?.event_id ?? '';
      return rows.length === 1;
    });
    const { rows: announced } = await t.sql.query(
      `SELECT organization_id, aggregate_type, aggregate_id, payload FROM audit_entry
       WHERE event_id = $1`,
      [announcementId],
    );
    expect(announced).toEqual([
      {
        organization_id: org.body.id,
        aggregate_type: 'outbox_event',
        aggregate_id: inviteId,
        payload: expect.objectContaining({
          eventId: inviteId,
          type: 'member.invited',
          attempts: 1,
          failedHandlers: ['audit-log'],
          lastError: expect.stringContaining('audit_spec_refuses_invites'),
        }),
      },
    ]);
    const { rows: missing } = await t.sql.query('SELECT 1 FROM audit_entry WHERE event_id = $1', [
      inviteId,
    ]);
    expect(missing).toEqual([]);

    await t.sql.query('ALTER TABLE audit_entry DROP CONSTRAINT audit_spec_refuses_invites');
    await eventually('the replayed event is delivered', async () => {
      const { rows } = await t.sql.query(
        'SELECT dispatched_at FROM outbox_event WHERE id = $1 AND dispatched_at IS NOT NULL',
        [inviteId],
      );
      return rows.length === 1;
    });
    await waitUntilDelivered(t.sql);

    const rows = await expectOneEntryPerEvent(t.sql);
    const seqOf = (id: string) => rows.find((row) => row.event_id === id)?.seq ?? -1;
    // Completion order: the event is chained after its own announcement, though it occurred first.
    expect(seqOf(inviteId)).toBeGreaterThan(seqOf(announcementId));
    const verified = (await http().get('/audit/verify').set(OPERATOR).expect(200)).body;
    expect(verified).toEqual({ valid: true, entries: rows.length });
  });
});
