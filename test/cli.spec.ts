import { execFile, execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { OUTBOX_EVENT_DISCARDED, OUTBOX_EVENT_REPLAYED } from '@app/outbox';
import { dropDatabase, withAdminClient } from './support/admin-client';
import { withDatabase } from './support/database-url';
import { createTestDatabase, type TestDatabase } from './support/test-database';
import { ADMIN_URL_ENV, TEMPLATE_ENV, requireRunEnv } from './support/test-run';

/**
 * The `nestjs-lease-outbox` command, run as a process (its compiled entry point) against
 * a real PostgreSQL: what it prints, what it changes, and the exit status a script reads.
 */

const ROOT = join(__dirname, '..');
/**
 * The library compiled once for this file, as its build does (under node_modules, so the
 * compiled files resolve the repository's packages): each run then starts a plain `node` on the
 * command's entry, as `npx nestjs-lease-outbox` does, not a TypeScript loader.
 */
const BUILD = join(ROOT, 'node_modules/.cache/outbox-cli-spec');
const ENTRY = join(BUILD, 'admin/cli/main.js');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [ENTRY, ...args],
      {
        cwd: ROOT,
        env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
        timeout: 30_000,
      },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

const json = <T>(run: Run): T => JSON.parse(run.stdout) as T;

let db: TestDatabase;
let env: Record<string, string>;

beforeAll(async () => {
  rmSync(BUILD, { recursive: true, force: true });
  execFileSync(
    process.execPath,
    [
      require.resolve('typescript/bin/tsc'),
      '-p',
      'libs/outbox/tsconfig.lib.json',
      '--outDir',
      BUILD,
    ],
    { cwd: ROOT, stdio: 'inherit' },
  );
  db = await createTestDatabase();
  env = { DATABASE_URL: db.url };
});

afterAll(async () => {
  await db?.close();
});

beforeEach(async () => {
  await db.dataSource.query('TRUNCATE outbox_event');
});

/** Three events dead for `webhook-sender` after a timeout outage, one retrying, one due. */
async function seed(): Promise<string[]> {
  const rows = await db.dataSource.query<{ id: string }[]>(`
    INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload, attempts, dead_at,
                              next_attempt_at, failures, deliveries, last_error)
    SELECT gen_random_uuid(), 'invoice.paid', 'invoice', 'inv-' || n,
           '{"card": "secret-4242"}', 3, now() - n * interval '1 minute', now() + interval '6 hours',
           '{"webhook-sender": {"count": 3, "retryAt": null}}',
           '{"audit-log": "2026-12-01T00:00:00Z"}',
           'webhook-sender: Error: connect ETIMEDOUT 10.0.0.' || n || ':443'
    FROM generate_series(1, 3) AS n
    ORDER BY n
    RETURNING id`);
  await db.dataSource.query(`
    INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload, attempts,
                              next_attempt_at, failures, last_error)
    VALUES (gen_random_uuid(), 'member.invited', 'member', 'm-1', '{}', 1,
            now() + interval '1 minute', '{"mailer": {"count": 1, "retryAt": "2030-01-01T00:00:00Z"}}',
            'mailer: Error: SMTP 421'),
           (gen_random_uuid(), 'member.invited', 'member', 'm-2', '{}', 0,
            now() - interval '3 seconds', '{}', NULL)`);
  return rows.map((r) => r.id);
}

describe('migrate', () => {
  it('applies the migrations to an empty database once, lists them first with --dry-run, and is then up to date', async () => {
    const adminUrl = requireRunEnv(ADMIN_URL_ENV);
    const name = `${requireRunEnv(TEMPLATE_ENV)}_cli_${randomBytes(3).toString('hex')}`;
    await withAdminClient(adminUrl, (client) => client.query(`CREATE DATABASE ${name}`));
    try {
      const url = withDatabase(adminUrl, name);
      const dry = await cli(['migrate', '--dry-run', '--url', url]);
      expect(dry).toMatchObject({ code: 0, stderr: '' });
      expect(dry.stdout).toContain('would apply CreateOutboxEvent1764400000000\n');

      const applied = await cli(['migrate', '--json'], { DATABASE_URL: url });
      expect(applied.code).toBe(0);
      expect(json(applied)).toEqual({
        dryRun: false,
        migrations: [
          'CreateOutboxEvent1764400000000',
          'OutboxDueIndex1765000000000',
          'OutboxEventCausation1766000000000',
          'OutboxHandlerFailures1767000000000',
          'OutboxDiscard1768000000000',
          'OutboxDiscardIndexes1768500000000',
          'OutboxDispatcherReports1769000000000',
          'OutboxOrganizationTypeIndex1770000000000',
          'OutboxAdminChange1771000000000',
          'OutboxClaimFunction1772000000000',
          'OutboxOrdering1773000000000',
          'OutboxOrderingIndexes1773500000000',
          'OutboxClaimPlans1774000000000',
          'OutboxFairClaims1775000000000',
          'OutboxFairIndex1775500000000',
          'OutboxHandlerLimits1776000000000',
        ],
      });
      expect(await cli(['migrate', '--url', url])).toEqual({
        code: 0,
        stdout: 'up to date: no migration to apply\n',
        stderr: '',
      });
      expect((await cli(['status', '--url', url])).code).toBe(0);
    } finally {
      await withAdminClient(adminUrl, (client) => dropDatabase(client, name));
    }
  });
});

describe('status', () => {
  it('prints counts, lag and the backlog by type; --fail-on-dead exits 4 while dead letters exist', async () => {
    await seed();
    const text = await cli(['status'], env);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(
      'due 1  retrying 1  in flight 0  expired leases 0  parked 0  dead 3',
    );
    expect(text.stdout).toMatch(/^invoice\.paid\s+0\s+0\s+0\s+3\s+0\s+-$/m);
    expect(text.stdout).toMatch(/^member\.invited\s+1\s+1\s+0\s+0\s+0\s+\d/m);

    const status = json<{ dead: number; lagMs: number; byType: { type: string }[] }>(
      await cli(['status', '--json'], env),
    );
    expect(status.dead).toBe(3);
    expect(status.lagMs).toBeGreaterThanOrEqual(3000);
    expect(status.byType.map((t) => t.type)).toEqual(['invoice.paid', 'member.invited']);

    expect((await cli(['status', '--fail-on-dead'], env)).code).toBe(4);
    await db.dataSource.query(`DELETE FROM outbox_event WHERE dead_at IS NOT NULL`);
    expect((await cli(['status', '--fail-on-dead'], env)).code).toBe(0);
  });
});

describe('partitions', () => {
  it('prints the partitions with the most due first tries and with the oldest, as text and JSON', async () => {
    await seed();
    await db.dataSource.query(`
      INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, organization_id, payload,
                                next_attempt_at)
      SELECT gen_random_uuid(), 'import.row', 'row', g::text, 'org-flood', '{}',
             now() - interval '1 second'
      FROM generate_series(1, 40) AS g`);
    const text = await cli(['partitions', '--top', '2'], env);
    expect(text.code).toBe(0);
    // m-2 has no organization: its partition is the one for events with neither.
    expect(text.stdout).toContain('2 partition(s) with due first tries');
    expect(text.stdout).toMatch(/most due\npartition\s+due\s+oldest due\norg-flood\s+40\s/);
    expect(text.stdout).toMatch(/oldest due\npartition\s+due\s+oldest due\n\(none\)\s+1\s/);
    const top = json<{ byDue: { partition: string; due: number }[] }>(
      await cli(['partitions', '--json'], env),
    );
    expect(top.byDue.map((p) => [p.partition, p.due])).toEqual([
      ['org-flood', 40],
      ['', 1],
    ]);
    expect((await cli(['partitions', '--top', '0'], env)).code).toBe(2);
  });
});

describe('dead', () => {
  it('lists, groups and shows dead letters, never printing a payload in a list', async () => {
    const ids = await seed();
    const list = await cli(['dead', 'list', '--type', 'invoice.paid', '--limit', '2'], env);
    expect(list.code).toBe(0);
    const lines = list.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^id\s+type\s+state\s+attempts\s+dead at\s+failed\s+last error$/);
    expect(lines[1]).toContain(`${ids[0]}  invoice.paid  dead`);
    expect(lines[1]).toContain('webhook-sender: Error: connect ETIMEDOUT 10.0.0.1:443');
    expect(lines.slice(3)).toEqual(['', expect.stringMatching(/^more: --after \S+$/)]);
    expect(list.stdout).not.toContain('secret-4242');

    const next = await cli(
      ['dead', 'list', '--json', '--after', lines[4].slice('more: --after '.length)],
      env,
    );
    expect(json<{ items: { id: string }[] }>(next).items.map((i) => i.id)).toEqual([ids[2]]);

    const groups = await cli(['dead', 'groups', '--json'], env);
    expect(json(groups)).toMatchObject([
      { type: 'invoice.paid', handler: 'webhook-sender', count: 3 },
    ]);

    const shown = await cli(['dead', 'show', ids[1]], env);
    expect(shown.code).toBe(0);
    expect(json(shown)).toMatchObject({
      id: ids[1],
      attempts: 3,
      deliveries: { 'audit-log': expect.any(String) },
    });
    expect(await cli(['dead', 'show', '0190a0a0-0000-7000-8000-000000000000'], env)).toEqual({
      code: 3,
      stdout: '',
      stderr: 'error: no outbox event 0190a0a0-0000-7000-8000-000000000000\n',
    });
  });

  it('replays after a dry run, only the handler asked for, and records who did it', async () => {
    const ids = await seed();
    const dry = await cli(['dead', 'replay', '--type', 'invoice.paid', '--dry-run'], env);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain('would replay 3 event(s) (dry run, nothing changed)\n');
    expect(dry.stderr).toBe('');
    // --handler filters; --rerun chooses who runs again: a filter alone says so.
    const filtered = await cli(['dead', 'replay', '--handler', 'webhook-sender', '--dry-run'], env);
    expect(filtered.code).toBe(0);
    expect(filtered.stderr).toBe(
      'note: --handler webhook-sender selects the events it failed; every handler that has not ' +
        'delivered them runs again. To run only it again, add --rerun webhook-sender.\n',
    );
    expect(
      await db.dataSource.query(`SELECT 1 FROM outbox_event WHERE type = $1`, [
        OUTBOX_EVENT_REPLAYED,
      ]),
    ).toEqual([]);

    const run = await cli(
      [
        'dead',
        'replay',
        '--type',
        'invoice.paid',
        '--rerun',
        'webhook-sender',
        '--actor',
        'ops:ana',
        '--json',
      ],
      env,
    );
    expect(run.code).toBe(0);
    expect(json<{ ids: string[] }>(run).ids.sort()).toEqual([...ids].sort());
    const [{ due }] = await db.dataSource.query<{ due: number }[]>(
      `SELECT count(*)::int AS due FROM outbox_event
       WHERE type = 'invoice.paid' AND next_attempt_at <= now()
         AND failures -> 'webhook-sender' ->> 'retryAt' IS NOT NULL`,
    );
    expect(due).toBe(3);
    const recorded = await db.dataSource.query<
      { payload: { actor: string; handlers: string[] } }[]
    >(`SELECT payload FROM outbox_event WHERE type = $1`, [OUTBOX_EVENT_REPLAYED]);
    expect(recorded).toHaveLength(3);
    expect(recorded[0].payload).toMatchObject({ actor: 'ops:ana', handlers: ['webhook-sender'] });
  });

  it('stops a change by filter at --max-rows, prints the counts by type and the cursor, and goes on with --after', async () => {
    const ids = await seed();
    const first = await cli(['dead', 'replay', '--type', 'invoice.paid', '--max-rows', '2'], env);
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(
      /^replayed 2 event\(s\)\nby type:\n {2}invoice\.paid {2}2\nids:\n(?: {2}[0-9a-f-]{36}\n){2}stopped at --max-rows; more may remain: go on with the same command and\n {2}--after [\w-]+\n$/,
    );
    const cursor = /--after ([\w-]+)\n$/.exec(first.stdout)![1];

    const rest = await cli(
      ['dead', 'replay', '--type', 'invoice.paid', '--after', cursor, '--json'],
      env,
    );
    expect(rest.code).toBe(0);
    expect(json(rest)).toMatchObject({
      count: 1,
      countsByType: { 'invoice.paid': 1 },
      cursor: null,
      stoppedBy: null,
    });
    const recorded = await db.dataSource.query<{ id: string }[]>(
      `SELECT DISTINCT payload ->> 'eventId' AS id FROM outbox_event WHERE type = $1`,
      [OUTBOX_EVENT_REPLAYED],
    );
    expect(recorded.map((r) => r.id).sort()).toEqual([...ids].sort());
  });

  it('exits 5 while another change by filter runs, naming it, and changes nothing', async () => {
    await seed();
    await db.dataSource.query(
      `INSERT INTO outbox_admin_change (scope, change_id, kind, actor, selection, expires_at)
       VALUES ('dead-letters', gen_random_uuid(), 'discard', 'ops:bo', '{}',
               now() + interval '1 minute')`,
    );
    try {
      const before = await db.dataSource.query(`SELECT * FROM outbox_event ORDER BY id`);
      const run = await cli(['dead', 'replay', '--type', 'invoice.paid'], env);
      expect(run.code).toBe(5);
      expect(run.stderr).toMatch(
        /^error: OutboxAdmin: cannot replay by filter now: a discard by filter by ops:bo, started at /,
      );
      expect(await db.dataSource.query(`SELECT * FROM outbox_event ORDER BY id`)).toEqual(before);
    } finally {
      await db.dataSource.query('TRUNCATE outbox_admin_change');
    }
  });

  it('discards with a reason, and lists the discarded event on request', async () => {
    const [first] = await seed();
    const missing = await cli(['dead', 'discard', first], env);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("required option '--reason <text>' not specified");

    const run = await cli(['dead', 'discard', first, '--reason', 'customer deleted'], env);
    expect(run).toMatchObject({
      code: 0,
      stdout: `discarded 1 event(s)\nby type:\n  invoice.paid  1\nids:\n  ${first}\n`,
    });
    const listed = json<{ items: { id: string; state: string; discardReason: string }[] }>(
      await cli(['dead', 'list', '--include-discarded', '--json'], env),
    );
    expect(listed.items.find((i) => i.id === first)).toMatchObject({
      state: 'discarded',
      discardReason: 'customer deleted',
    });
    const [row] = await db.dataSource.query<{ payload: { actor: string } }[]>(
      `SELECT payload FROM outbox_event WHERE type = $1`,
      [OUTBOX_EVENT_DISCARDED],
    );
    expect(row.payload.actor).toMatch(/^cli(:.+)?$/);
  });

  it.each([
    [['dead', 'replay'], 'give event ids, filter options, or --all'],
    [['dead', 'replay', '0190a0a0-0000-7000-8000-000000000000', '--type', 'x'], 'not both'],
    [['dead', 'replay', 'not-an-id'], 'selector.ids must be a UUID, got "not-an-id"'],
    [['dead', 'list', '--limit', 'ten'], "option '--limit <n>' argument 'ten' is invalid"],
    [['dead', 'list', '--dead-after', 'yesterday'], 'expected an ISO time'],
    [['dead', 'list', '--limit', '501'], 'page.limit must be an integer from 1 to 500'],
    [['dead', 'replay', '--type', 'x', '--max-rows', '0'], "option '--max-rows <n>' argument '0'"],
    [['dead', 'replay', '--type', 'x', '--max-rows', '100001'], 'options.maxRows must be'],
    [['dead', 'replay', '--type', 'x', '--after', 'nope'], 'options.after must be the `cursor`'],
    [['dead', 'frobnicate'], "unknown command 'frobnicate'"],
  ])('exits 2 on %j, saying %s, and changes nothing', async (args, message) => {
    await seed();
    const before = await db.dataSource.query(`SELECT * FROM outbox_event ORDER BY id`);
    const run = await cli(args, env);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(message);
    expect(await db.dataSource.query(`SELECT * FROM outbox_event ORDER BY id`)).toEqual(before);
  });
});

describe('dead blocked', () => {
  it('lists the keys an ordered handler is blocked on, with the events waiting, and how to unblock', async () => {
    // Key acct:1: its head dead for `ledger`, two events behind it; acct:2: its head retrying.
    const [head] = await db.dataSource.query<{ id: string }[]>(`
      INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload, attempts, dead_at,
                                next_attempt_at, failures, last_error, ordering_key,
                                ordering_position, ordered_for)
      VALUES (gen_random_uuid(), 'account.credited', 'account', '1', '{"iban": "secret"}', 2,
              now(), now() + interval '6 hours', '{"ledger": {"count": 2, "retryAt": null}}',
              'ledger: Error: account locked', 'acct:1', 1, '{ledger}')
      RETURNING id`);
    await db.dataSource.query(`
      INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload, next_attempt_at,
                                ordering_key, ordering_position, ordered_for, dead_at)
      VALUES (gen_random_uuid(), 'account.credited', 'account', '1', '{}', '9999-12-31 00:00:00+00', 'acct:1', 2,
              '{ledger}', NULL),
             (gen_random_uuid(), 'account.credited', 'account', '1', '{}', '9999-12-31 00:00:00+00', 'acct:1', 3,
              '{ledger}', NULL),
             (gen_random_uuid(), 'account.credited', 'account', '2', '{}', now(), 'acct:2', 1,
              '{ledger}', NULL)`);

    const text = await cli(['dead', 'blocked'], env);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    expect(text.stdout).toMatch(
      new RegExp(
        `^handler +key +head event +dead since +waiting +last error\n` +
          `ledger +acct:1 +${head.id} +\\S+ +2 +Error: account locked\n`,
      ),
    );
    expect(text.stdout).toContain('unblock: dead replay <eventId>');
    expect(text.stdout).not.toContain('secret');

    const listed = json<{ items: { key: string; waiting: number }[]; next: null }>(
      await cli(['dead', 'blocked', '--handler', 'ledger', '--json'], env),
    );
    expect(listed.items.map((b) => [b.key, b.waiting])).toEqual([['acct:1', 2]]);
    expect(await cli(['dead', 'blocked', '--handler', 'mailer'], env)).toMatchObject({
      code: 0,
      stdout: 'no blocked keys\n',
    });
    const bad = await cli(['dead', 'blocked', '--after', 'nope'], env);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('filter.after');
  });
});

describe('connection', () => {
  it('exits 2 without a database, and 1 when it cannot reach one, never printing the password', async () => {
    const none = await cli(['status']);
    expect(none).toMatchObject({
      code: 2,
      stderr: 'error: no database: pass --url or set DATABASE_URL\n',
    });

    const refused = await cli([
      'status',
      '--url',
      'postgres://outbox:hunter2-secret@127.0.0.1:1/outbox',
    ]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^error: .*ECONNREFUSED/);
    expect(refused.stderr + refused.stdout).not.toContain('hunter2');
  });

  it('never echoes a password in a mistyped option back, nor a control character of an error', async () => {
    const mistyped = await cli(['status', '--database-url=postgres://app:S3cr3t-pw@db/app'], env);
    expect(mistyped.code).toBe(2);
    expect(mistyped.stderr).toContain(
      "unknown option '--database-url=postgres://[redacted]@db/app'",
    );
    expect(mistyped.stderr + mistyped.stdout).not.toContain('S3cr3t');

    // An error written by an older version, before errors were escaped when stored.
    await seed();
    await db.dataSource.query(
      `UPDATE outbox_event SET last_error = E'webhook-sender: HTTP 500 \\x1b[2J\\x1b[H\\r\\nERROR forged \\u202e'
       WHERE dead_at IS NOT NULL`,
    );
    for (const args of [
      ['dead', 'groups'],
      ['dead', 'list'],
      ['dead', 'groups', '--json'],
    ]) {
      const run = await cli(args, env);
      expect(run.code).toBe(0);
      // eslint-disable-next-line no-control-regex -- the raw characters must not be there
      expect(run.stdout).not.toMatch(/[\u001b\r\u202e]/);
      // Shown escaped, as text and as JSON alike.
      expect(run.stdout).toContain('\\u001b[2J');
    }
    const groups = await cli(['dead', 'groups', '--json'], env);
    expect(JSON.parse(groups.stdout)).toMatchObject([
      { sampleError: expect.stringContaining('\u001b[2J\u001b[H\r\nERROR forged \u202e') },
    ]);
  });
});
