import type { Client } from 'pg';
import { OutboxEngine } from '../../libs/outbox/src';
import { CLAIM_LIVE_CALL, claimParameters } from '../../libs/outbox/src/store/lease/claim.sql';
import { nestedPlans, rowsRead, tableScans } from '../../test/support/query-plans';
import { createOutboxApp } from '../support/app';
import { timeClaim, type Statement } from '../support/claim-timing';
import { withFreshDatabase, type BenchDatabase } from '../support/database';
import { countParked, emitKeyed } from '../support/keyed-backlog';
import { percentile } from '../support/percentiles';
import { count, ms, note, times } from '../support/report';
import type { Scenario } from './scenario';

const BLOCKED_KEYS = 100;
const WAITING = 10_000;
const DUE = 100;
const WARM_UP = 10;
const TIMED_CLAIMS = 200;

/** What the engine sends while no dead row may be due: the live claim function, 100 rows. */
const CLAIM: Statement = {
  text: CLAIM_LIVE_CALL,
  values: claimParameters({ limit: DUE, leaseMs: 60_000, includeDead: false, skipDead: [] }),
};

/**
 * With `blocked`: BLOCKED_KEYS keys of an ordered handler whose dead events block their key, each
 * key's head dead (it failed its one attempt, through the engine) and WAITING events parked behind
 * the heads. Then, for both: DUE due events of other keys for the same handler.
 */
async function load(db: BenchDatabase, blocked: boolean): Promise<void> {
  const app = await createOutboxApp(db.url, {
    handler: 'ordered-poison',
    autoStart: false,
    outbox: { maxAttempts: 1 },
    quiet: true,
  });
  try {
    if (blocked) {
      await emitKeyed(app, BLOCKED_KEYS + WAITING, (i) => `blocked-${i % BLOCKED_KEYS}`);
      for (let dead = 0; dead < BLOCKED_KEYS;) {
        const report = await app.get(OutboxEngine).drainOnce();
        if (!report.ok || report.claimed === 0) throw new Error('the heads did not all die');
        dead += report.dead;
      }
    }
    await emitKeyed(app, DUE, (i) => `due-${i}`, BLOCKED_KEYS + WAITING);
  } finally {
    await app.close();
  }
  await db.sql.query('VACUUM ANALYZE outbox_event');
}

/** Rows the claim inside the function read on outbox_event, and the buffers it touched. */
async function explain(sql: Client): Promise<{ rows: number; buffers: number; claimed: number }> {
  const { plans } = await nestedPlans(sql, CLAIM.text, CLAIM.values);
  const inner = plans.find((p) => p.queryText.includes('FOR UPDATE SKIP LOCKED'))!.plan;
  return {
    rows: tableScans(inner).reduce((sum, scan) => sum + rowsRead(scan), 0),
    buffers: (inner['Shared Hit Blocks'] ?? 0) + (inner['Shared Read Blocks'] ?? 0),
    claimed: inner['Actual Rows'] ?? 0,
  };
}

/**
 * The live claim of DUE due events with BLOCKED_KEYS keys blocked by dead heads and WAITING
 * events parked behind them, against the same claim with none: median and p95 time of the
 * statement the engine sends (each run rolled back, the two databases taken in turn), and what
 * the claim inside the function reads (EXPLAIN (ANALYZE, BUFFERS) through auto_explain).
 */
export const blockedClaim: Scenario = {
  name: 'blocked-claim',
  title: `claim of ${DUE} due events, ${count(WAITING)} waiting behind ${BLOCKED_KEYS} blocked keys vs none`,
  run: (server) =>
    withFreshDatabase(server, 'blocked_claim', (blocked) =>
      withFreshDatabase(server, 'unblocked_claim', async (clear) => {
        await load(blocked, true);
        await load(clear, false);
        const { rows } = await blocked.sql.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM outbox_event WHERE dead_at IS NOT NULL`,
        );
        note(
          `${rows[0].n} dead heads, ${count(await countParked(blocked.sql))} parked behind them`,
        );

        const samples = { blocked: [] as number[], clear: [] as number[] };
        for (let i = 0; i < WARM_UP + TIMED_CLAIMS; i++) {
          const a = await timeClaim(blocked.sql, CLAIM);
          const b = await timeClaim(clear.sql, CLAIM);
          if (i < WARM_UP) continue;
          samples.blocked.push(a);
          samples.clear.push(b);
        }
        const [p50, p95] = [50, 95].map((p) => ({
          blocked: percentile(
            [...samples.blocked].sort((x, y) => x - y),
            p,
          ),
          clear: percentile(
            [...samples.clear].sort((x, y) => x - y),
            p,
          ),
        }));
        note(
          `${TIMED_CLAIMS} claims each: blocked p50 ${ms(p50.blocked)} / p95 ${ms(p95.blocked)}, ` +
            `none p50 ${ms(p50.clear)} / p95 ${ms(p95.clear)}`,
        );
        const withBlocked = await explain(blocked.sql);
        const without = await explain(clear.sql);
        note(
          `inner claim: ${count(withBlocked.rows)} rows read, ${count(withBlocked.buffers)} buffers ` +
            `for ${withBlocked.claimed} claimed (blocked); ${count(without.rows)} rows, ` +
            `${count(without.buffers)} buffers for ${without.claimed} (none)`,
        );
        return [
          {
            figure: `claim, ${count(WAITING)} behind ${BLOCKED_KEYS} blocked keys: median time vs none`,
            value: `${ms(p50.blocked)} vs ${ms(p50.clear)} = ${ratio(p50)}`,
            target: '≤ 2 ×',
          },
          {
            figure: `claim, ${count(WAITING)} behind ${BLOCKED_KEYS} blocked keys: p95 time vs none`,
            value: `${ms(p95.blocked)} vs ${ms(p95.clear)} = ${ratio(p95)}`,
            target: '≤ 2 ×',
          },
        ];
      }),
    ),
};

function ratio(pair: { blocked: number; clear: number }): string {
  return times(pair.blocked / pair.clear);
}
