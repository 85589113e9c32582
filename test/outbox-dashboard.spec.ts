import { Injectable, type CanActivate } from '@nestjs/common';
import request from 'supertest';
import {
  InvalidOutboxDashboardOptionsError,
  OnOutboxEvent,
  OUTBOX_EVENT_REPLAYED,
} from '@app/outbox';
import { OutboxDashboardModule } from '@app/outbox/admin';
import { drainUntilIdle } from '@app/outbox/testing';
import { claimAdminChange, insertDeadRows, useAdminApp } from './support/admin-fixture';
import { emitCommitted } from './support/outbox-app';
import { holdHorizon } from './support/horizon';

/**
 * OutboxDashboardModule over HTTP: what it refuses to mount, what its guard does, that every
 * value on the page is escaped, and that bad input and foreign forms get 4xx, never a 500.
 */

@Injectable()
class Handlers {
  @OnOutboxEvent('mailer', { events: ['<script>alert(1)</script>'] })
  mailer() {
    throw new Error('<img src=x onerror=alert(2)> refused');
  }
}

/** Lets in requests that carry the operator's header, as a real auth guard would a session. */
@Injectable()
class HeaderGuard implements CanActivate {
  canActivate(context: Parameters<CanActivate['canActivate']>[0]): boolean {
    const request = context.switchToHttp().getRequest<{ headers: Record<string, unknown> }>();
    return request.headers['x-operator'] === 'ana';
  }
}

const t = useAdminApp({
  testing: { maxAttempts: 1 },
  providers: [Handlers],
  imports: [OutboxDashboardModule.forRoot({ path: '/ops/outbox', guard: HeaderGuard })],
});

beforeAll(async () => {
  await emitCommitted(t.app, {
    type: '<script>alert(1)</script>',
    aggregateType: 'x',
    aggregateId: '1',
    payload: {},
  });
  await drainUntilIdle(t.app);
});

const operator = () => ({ 'x-operator': 'ana' });
/** What a browser sends with a form posted from the page itself. */
const fromThePage = () => ({ ...operator(), 'sec-fetch-site': 'same-origin' });

describe('mounting', () => {
  it.each([
    [{}, 'guard', /must be a guard: the page replays and discards events/],
    [{ unguarded: 'production' }, 'unguarded', /must be 'local-development'/],
    [{ guard: 'yes' }, 'guard', /must be a CanActivate guard class or instance/],
    [{ guard: HeaderGuard, unguarded: 'local-development' }, 'unguarded', /absent when a guard/],
    [{ path: 'outbox', guard: HeaderGuard }, 'path', /an absolute URL path/],
    [{ path: '/outbox/', guard: HeaderGuard }, 'path', /without a trailing slash/],
  ])('refuses %j, naming %s', (options, field, message) => {
    let error: unknown;
    try {
      OutboxDashboardModule.forRoot(options as never);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidOutboxDashboardOptionsError);
    expect((error as InvalidOutboxDashboardOptionsError).field).toBe(field);
    expect((error as Error).message).toMatch(message);
  });

  it('mounts without a guard only when told the page is for local development', () => {
    expect(
      OutboxDashboardModule.forRoot({ unguarded: 'local-development' }).controllers,
    ).toHaveLength(1);
  });
});

describe('the page', () => {
  it('is behind the guard', async () => {
    await request(t.app.getHttpServer()).get('/ops/outbox').expect(403);
    await request(t.app.getHttpServer()).post('/ops/outbox/replay').send('id=x').expect(403);
  });

  it('shows how long a transaction has held the xmin horizon, and the dead tuples', async () => {
    const horizon = await holdHorizon(() => t.db.connect());
    try {
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const page = await request(t.app.getHttpServer())
        .get('/ops/outbox')
        .set(operator())
        .expect(200);
      const card = (label: string) =>
        new RegExp(`data-testid="count-${label}"><b>([^<]*)</b>`).exec(page.text)?.[1];
      expect(card('horizon held')).toMatch(/^\d+(\.\d+)? ?s$/);
      expect(card('dead tuples')).toMatch(/^\d+$/);
    } finally {
      await horizon.release();
    }
  });

  it('shows who floods: the partitions with the most due events and with the oldest, escaped', async () => {
    const http = request(t.app.getHttpServer());
    const empty = await http.get('/ops/outbox').set(operator()).expect(200);
    expect(empty.text).toContain('data-testid="no-partitions"');
    await t.db.dataSource.query(`
      INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, organization_id, payload,
                                next_attempt_at)
      SELECT gen_random_uuid(), 'import.row', 'row', g::text,
             CASE WHEN g <= 30 THEN '<i>flood</i>' ELSE 'org-old' END, '{}',
             CASE WHEN g <= 30 THEN now() - interval '1 second' ELSE now() - interval '2 hours' END
      FROM generate_series(1, 31) AS g`);
    try {
      const page = await http.get('/ops/outbox').set(operator()).expect(200);
      const byDue = /<table data-testid="partitions-by-due">[\s\S]*?<\/table>/.exec(page.text)?.[0];
      const byOldest = /<table data-testid="partitions-by-oldest">[\s\S]*?<\/table>/.exec(
        page.text,
      )?.[0];
      expect(byDue).toMatch(/&lt;i&gt;flood&lt;\/i&gt;<\/td>\s*<td class="n">\s*30\s*<\/td>/);
      expect(byDue).not.toContain('<i>flood');
      expect(byOldest?.indexOf('org-old')).toBeLessThan(byOldest?.indexOf('flood') ?? -1);
    } finally {
      await t.db.dataSource.query(`DELETE FROM outbox_event WHERE type = 'import.row'`);
    }
  });

  it('shows each limited handler held by its limit, escaped', async () => {
    const http = request(t.app.getHttpServer());
    const empty = await http.get('/ops/outbox').set(operator()).expect(200);
    expect(empty.text).toContain('data-testid="no-limits"');
    // Before the limits' migration has run, the page shows no limit rather than failing.
    await t.db.dataSource.query(`ALTER TABLE outbox_handler_limit RENAME TO limits_not_yet`);
    try {
      const before = await http.get('/ops/outbox').set(operator()).expect(200);
      expect(before.text).toContain('data-testid="no-limits"');
    } finally {
      await t.db.dataSource.query(`ALTER TABLE limits_not_yet RENAME TO outbox_handler_limit`);
    }
    await t.db.dataSource.query(`
      INSERT INTO outbox_handler_limit
        (handler, partition_key, holders, starts, promised, held, max_concurrent, rate_limit, per_ms)
      VALUES ('mail-send', '<b>org</b>', jsonb_build_object('run-1', now() + interval '1 minute'),
              ARRAY[now(), now()], now() + interval '1 minute', 7, 3, 10, 1000)`);
    try {
      const page = await http.get('/ops/outbox').set(operator()).expect(200);
      const limits = /<table data-testid="limits">[\s\S]*?<\/table>/.exec(page.text)?.[0];
      expect(limits).toContain('&lt;b&gt;org&lt;/b&gt;');
      expect(limits).not.toContain('<b>org');
      expect(limits).toContain('3 at once, 10 per 1000 ms');
      // In flight, in window, held by limit.
      expect(limits).toMatch(
        />\s*1\s*<\/td>\s*<td class="n">\s*2\s*<\/td>\s*<td class="n">\s*7\s*</,
      );
    } finally {
      await t.db.dataSource.query(`DELETE FROM outbox_handler_limit`);
    }
  });

  it('escapes every value it shows: types, handlers and errors are data, never markup', async () => {
    const page = await request(t.app.getHttpServer())
      .get('/ops/outbox')
      .set(operator())
      .expect(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    // Never framed by another site, which could make an operator's click replay.
    expect(page.headers['x-frame-options']).toBe('DENY');
    expect(page.headers['content-security-policy']).toBe("frame-ancestors 'none'");
    expect(page.text).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(page.text).toContain('&lt;img src=x onerror=alert(2)&gt; refused');
    expect(page.text).not.toMatch(/<script>|<img /);
  });

  it('answers bad input with a 400 and an unknown event with a 404, as pages', async () => {
    const http = request(t.app.getHttpServer());
    const bad = await http.get('/ops/outbox/dead?fingerprint=nope').set(operator()).expect(400);
    expect(bad.text).toContain('filter.fingerprint must be a fingerprint of groups');
    await http
      .get('/ops/outbox/events/0190a0a0-0000-7000-8000-000000000000')
      .set(operator())
      .expect(404);
    await http.get('/ops/outbox/events/42').set(operator()).expect(404);
    const action = await http
      .post('/ops/outbox/confirm')
      .set(fromThePage())
      .type('form')
      .send({ action: 'delete', type: 'x' })
      .expect(400);
    expect(action.text).toContain('action must be &#39;replay&#39; or &#39;discard&#39;');
    const everything = await http
      .post('/ops/outbox/replay')
      .set(fromThePage())
      .type('form')
      .send({})
      .expect(400);
    expect(everything.text).toContain('selector.filter must be a filter with at least one');
  });

  it('refuses a form posted from another origin or from no page, and changes nothing', async () => {
    const http = request(t.app.getHttpServer());
    const [before] = await t.db.dataSource.query<{ next_attempt_at: Date }[]>(
      `SELECT next_attempt_at FROM outbox_event WHERE dead_at IS NOT NULL`,
    );
    await http
      .post('/ops/outbox/replay')
      .set({ ...operator(), origin: 'https://evil.example' })
      .type('form')
      .send({ type: '<script>alert(1)</script>' })
      .expect(403);
    // Neither an Origin nor a same-origin fetch: not a form of the page.
    await http
      .post('/ops/outbox/replay')
      .set({ ...operator(), 'sec-fetch-site': 'cross-site' })
      .type('form')
      .send({ type: '<script>alert(1)</script>' })
      .expect(403);
    await http
      .post('/ops/outbox/replay')
      .set(operator())
      .type('form')
      .send({ type: '<script>alert(1)</script>' })
      .expect(403);
    const [after] = await t.db.dataSource.query<{ next_attempt_at: Date }[]>(
      `SELECT next_attempt_at FROM outbox_event WHERE dead_at IS NOT NULL`,
    );
    expect(after).toEqual(before);

    // The page's own form (same origin) goes through, and lands back on the overview.
    const host = 'dashboard.test';
    const done = await http
      .post('/ops/outbox/replay')
      .set({ ...operator(), host, origin: `https://${host}` })
      .type('form')
      .send({ type: '<script>alert(1)</script>' })
      .expect(303);
    expect(done.headers.location).toBe('/ops/outbox?notice=replayed&count=1');
    const landed = await http.get(done.headers.location).set(operator()).expect(200);
    expect(landed.text).toContain('Replayed 1 events.');
  });

  it('counts a large selection only up to its bound, changes 10,000 at a time, and goes on from the notice', async () => {
    const http = request(t.app.getHttpServer());
    const host = 'dashboard.test';
    const page = { ...operator(), host, origin: `https://${host}` };
    await insertDeadRows(t.db.dataSource, 'bulk.imported', 10050);
    const replayed = () =>
      t.db.dataSource.query<{ events: number; distinct: number }[]>(
        `SELECT count(*)::int AS events, count(DISTINCT payload ->> 'eventId')::int AS distinct
         FROM outbox_event WHERE type = $1 AND payload ->> 'type' = 'bulk.imported'`,
        [OUTBOX_EVENT_REPLAYED],
      );
    try {
      // The dry run counts one more than a change takes, not the whole selection.
      const confirm = await http
        .post('/ops/outbox/confirm')
        .set(page)
        .type('form')
        .send({ action: 'replay', type: 'bulk.imported' })
        .expect(200);
      expect(confirm.text).toMatch(
        /Replay the first <b>10,000<\/b> of more than 10,000 events \(type bulk\.imported\)\?/,
      );
      expect(confirm.text).toMatch(/<td>bulk\.imported<\/td>\s*<td class="n">10,001<\/td>/);
      expect(await replayed()).toEqual([{ events: 0, distinct: 0 }]);

      const first = await http
        .post('/ops/outbox/replay')
        .set(page)
        .type('form')
        .send({ type: 'bulk.imported' })
        .expect(303);
      const location = new URL(first.headers.location, 'http://x');
      expect(location.searchParams.get('count')).toBe('10000');
      expect(location.searchParams.get('type')).toBe('bulk.imported');
      const cursor = location.searchParams.get('cursor')!;
      expect(cursor).toEqual(expect.any(String));
      const landed = await http.get(first.headers.location).set(operator()).expect(200);
      expect(landed.text).toContain('Replayed 10000 events. More may remain');
      expect(landed.text).toContain(`name="cursor" value="${cursor}"`);
      expect(landed.text).toContain('data-testid="go-on"');

      // Going on: the confirmation counts the rest, and the change takes exactly them.
      const rest = await http
        .post('/ops/outbox/confirm')
        .set(page)
        .type('form')
        .send({ action: 'replay', type: 'bulk.imported', cursor })
        .expect(200);
      expect(rest.text).toMatch(/Replay <b>50<\/b> events \(type bulk\.imported\)\?/);
      expect(rest.text).toContain(`name="cursor" value="${cursor}"`);
      const done = await http
        .post('/ops/outbox/replay')
        .set(page)
        .type('form')
        .send({ type: 'bulk.imported', cursor })
        .expect(303);
      expect(done.headers.location).toBe('/ops/outbox?notice=replayed&count=50');
      expect(await replayed()).toEqual([{ events: 10050, distinct: 10050 }]);
    } finally {
      await t.db.dataSource.query(`DELETE FROM outbox_event WHERE type IN ('bulk.imported', $1)`, [
        OUTBOX_EVENT_REPLAYED,
      ]);
    }
  });

  it('answers a change by filter while another runs with a 409 page naming it', async () => {
    const http = request(t.app.getHttpServer());
    const host = 'dashboard.test';
    await claimAdminChange(t.db.dataSource, 'replay', 'cli:ops');
    try {
      const refused = await http
        .post('/ops/outbox/discard')
        .set({ ...operator(), host, origin: `https://${host}` })
        .type('form')
        .send({ type: '<script>alert(1)</script>', reason: 'cleanup' })
        .expect(409);
      expect(refused.text).toContain('a replay by filter by cli:ops');
      expect(refused.headers['cache-control']).toBe('no-store');
    } finally {
      await t.db.dataSource.query('TRUNCATE outbox_admin_change');
    }
  });

  it("shows only its own notices, chosen by code: a link cannot put the caller's text on the page", async () => {
    const http = request(t.app.getHttpServer());
    for (const notice of [
      'All dead letters were lost, call +1 555 0100',
      'constructor',
      'replayed&count=-1',
      'replayed&count=1e9',
    ]) {
      const page = await http
        .get(`/ops/outbox?notice=${notice.includes('&') ? notice : encodeURIComponent(notice)}`)
        .set(operator())
        .expect(200);
      expect(page.text).not.toMatch(/call \+1|Replayed|function/);
    }
    const discarded = await http.get('/ops/outbox?notice=discarded&count=12').set(operator());
    expect(discarded.text).toContain('Discarded 12 events.');
  });

  it('sends no-store and nosniff on every response: pages, error pages, redirects and refusals', async () => {
    const http = request(t.app.getHttpServer());
    const host = 'dashboard.test';
    const responses = [
      await http.get('/ops/outbox').set(operator()).expect(200),
      await http.get('/ops/outbox/dead?fingerprint=nope').set(operator()).expect(400),
      await http.get('/ops/outbox/events/42').set(operator()).expect(404),
      await http.get('/ops/outbox').expect(403),
      await http
        .post('/ops/outbox/replay')
        .set({ ...operator(), origin: 'https://evil.example' })
        .type('form')
        .send({ type: 'x' })
        .expect(403),
      await http
        .post('/ops/outbox/discard')
        .set({ ...operator(), host, origin: `https://${host}` })
        .type('form')
        .send({ type: 'no.such.type', reason: 'cleanup' })
        .expect(303),
    ];
    for (const response of responses) {
      expect(response.headers).toMatchObject({
        'cache-control': 'no-store',
        'x-content-type-options': 'nosniff',
        'x-frame-options': 'DENY',
      });
    }
  });

  it("lists the keys ordered handlers are blocked on, escaped, with the head's replay and discard", async () => {
    const inserted = await t.db.dataSource.query<{ id: string; dead: boolean }[]>(`
      INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload, attempts, dead_at,
                                next_attempt_at, last_error, ordering_key, ordering_position,
                                ordered_for)
      VALUES (gen_random_uuid(), 'account.credited', 'account', '1', '{}', 2, now(),
              now() + interval '6 hours', 'ledger: Error: account locked', '<b>acct</b>', 1,
              '{ledger}'),
             (gen_random_uuid(), 'account.credited', 'account', '1', '{}', 0, NULL,
              '9999-12-31 00:00:00+00', NULL, '<b>acct</b>', 2, '{ledger}')
      RETURNING id, dead_at IS NOT NULL AS dead`);
    const head = inserted.find((row) => row.dead)!;
    try {
      const http = request(t.app.getHttpServer());
      const page = await http.get('/ops/outbox/blocked').set(operator()).expect(200);
      const table = /<table data-testid="blocked-keys">[\s\S]*<\/table>/.exec(page.text)?.[0];
      expect(table).toContain('&lt;b&gt;acct&lt;/b&gt;');
      expect(table).not.toContain('<b>acct');
      expect(table).toContain(`/ops/outbox/events/${head.id}`);
      expect(table).toContain('Error: account locked');
      expect(table).toMatch(/<td class="n">\s*1\s*<\/td>/);
      // Replay and discard of the head, each through its confirmation page.
      expect(table?.match(new RegExp(`name="id" value="${head.id}"`, 'g'))).toHaveLength(2);
      expect(page.text).toContain('href="/ops/outbox/blocked"');

      const other = await http
        .get('/ops/outbox/blocked?handler=mailer')
        .set(operator())
        .expect(200);
      expect(other.text).toContain('data-testid="no-blocked-keys"');
      const bad = await http.get('/ops/outbox/blocked?after=nope').set(operator()).expect(400);
      expect(bad.text).toContain('filter.after');
    } finally {
      await t.db.dataSource.query(`DELETE FROM outbox_event WHERE ordering_key = '<b>acct</b>'`);
    }
  });
});
