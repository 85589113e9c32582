import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { OutboxEngine } from '../../libs/outbox/src';
import { createOutboxApp } from '../support/app';
import { commitToHandlerLatency } from '../support/commit-latency';
import { HELD_XMIN_EVENTS, RATE_PER_SECOND } from '../support/config';
import {
  countDelivered,
  insertEvents,
  waitUntilSettled,
  withFreshDatabase,
  type BenchDatabase,
} from '../support/database';
import { nestedPlans, planNodes, type PlanNode } from '../../test/support/query-plans';
import { formatLatency } from '../support/percentiles';
import { count, ms, note, times } from '../support/report';
import type { Scenario } from './scenario';

const TIMEOUT_MS = 300_000;
/** 0.5 % of a 20 s burn-down; each poll walks the dead entries the engine skips. */
const SETTLED_POLL_MS = 100;

/**
 * What the engine's live claims call, whichever version (`CLAIM_LIVE_CALL`, `CLAIM_FAIR_CALL`): the
 * call itself, not the lookup of which functions exist, which names them too.
 */
const LIVE_CLAIM = /FROM outbox_claim_(live|fair)_v\d\(/;

/** The live claims the module sent, as sent (values inlined), newest last. */
const sentClaims: string[] = [];
type Query = (this: Client, ...args: unknown[]) => unknown;
const prototype = Client.prototype as unknown as { query: Query };
const originalQuery = prototype.query;

function recordClaims(on: boolean): void {
  if (!on) {
    prototype.query = originalQuery;
    return;
  }
  prototype.query = function (this: Client, ...args: unknown[]) {
    const [text] = args;
    if (typeof text === 'string' && LIVE_CLAIM.test(text)) {
      sentClaims.push(text);
      if (sentClaims.length > 100) sentClaims.shift();
    }
    return originalQuery.apply(this, args);
  };
}

/** The claim of a recorded transaction (`BEGIN; SET LOCAL …; <claim>; COMMIT`). */
function claimOf(sent: string): string {
  const parts = sent.split(';\n');
  return parts.find((part) => LIVE_CLAIM.test(part))!;
}

/** The same claim from the start of the due range: its lower bound (the one timestamptz) null. */
function fromTheStart(claim: string): string {
  return claim.replace(/'[^']*'::timestamptz/, 'NULL::timestamptz');
}

/** Burn-down of HELD_XMIN_EVENTS pre-loaded rows through the module, in events/s. */
async function burnDown(db: BenchDatabase): Promise<number> {
  await insertEvents(db.sql, HELD_XMIN_EVENTS);
  await db.sql.query('ANALYZE outbox_event');
  const app = await createOutboxApp(db.url, { handler: 'noop', autoStart: false });
  try {
    const started = performance.now();
    await app.get(OutboxEngine).start();
    const settled = await waitUntilSettled(db.sql, TIMEOUT_MS, SETTLED_POLL_MS);
    const delivered = settled ? HELD_XMIN_EVENTS : await countDelivered(db.sql);
    return delivered / ((performance.now() - started) / 1000);
  } finally {
    await app.close();
  }
}

function dueIndexBuffers(node: PlanNode): number {
  return planNodes(node)
    .filter((n) => n['Index Name'] === 'outbox_event_due_idx')
    .reduce((sum, n) => sum + (n['Shared Hit Blocks'] ?? 0) + (n['Shared Read Blocks'] ?? 0), 0);
}

/**
 * The claim inside the function under EXPLAIN (ANALYZE, BUFFERS) (`auto_explain`), rolled back:
 * due-index buffers and rows returned.
 */
async function explain(sql: Client, claim: string): Promise<{ buffers: number; rows: number }> {
  const { plans } = await nestedPlans(sql, claim);
  const inner = plans.find((p) => p.queryText.includes('FOR UPDATE SKIP LOCKED'))!.plan;
  return { buffers: dueIndexBuffers(inner), rows: inner['Actual Rows'] ?? 0 };
}

/**
 * A long transaction (a backup, a report) holds the xmin horizon: a `REPEATABLE READ`
 * transaction opened before the burn-down and held to the end. Burn-down and 100 events/s
 * latency with it, against the same without it; then one claim as the engine last sent it,
 * under EXPLAIN (ANALYZE, BUFFERS), with 100 rows due: buffers of the due index per row returned,
 * and the same claim from the start of the index for comparison.
 */
export const heldXmin: Scenario = {
  name: 'held-xmin',
  title: `${HELD_XMIN_EVENTS} events while a transaction holds the xmin horizon, vs without`,
  run: (server) =>
    withFreshDatabase(server, 'held-xmin', async (db) => {
      const free = await burnDown(db);
      const freeLatency = await commitToHandlerLatency(db.url, { module: 'noop' });
      note(`without: ${count(free)} events/s; ${formatLatency(freeLatency)}`);

      await db.sql.query('TRUNCATE outbox_event');
      await db.sql.query('VACUUM outbox_event');
      const holder = new Client({ connectionString: db.url, application_name: 'bench-holder' });
      await holder.connect();
      let held: number;
      let heldLatency: Awaited<ReturnType<typeof commitToHandlerLatency>>;
      let fromBound: { buffers: number; rows: number } | undefined;
      let fromStart: { buffers: number; rows: number } | undefined;
      try {
        await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
        await holder.query('SELECT count(*) FROM outbox_event');
        held = await burnDown(db);
        recordClaims(true);
        try {
          heldLatency = await commitToHandlerLatency(db.url, { module: 'noop' });
        } finally {
          recordClaims(false);
        }
        note(`with:    ${count(held)} events/s; ${formatLatency(heldLatency)}`);
        const { rows: dead } = await db.sql.query<{ n_dead_tup: string }>(
          `SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'outbox_event'`,
        );
        note(`dead tuples while held: ${count(Number(dead[0]?.n_dead_tup ?? 0))}`);
        const last = sentClaims.at(-1);
        if (last) {
          await insertEvents(db.sql, 100);
          const claim = claimOf(last);
          fromBound = await explain(db.sql, claim);
          fromStart = await explain(db.sql, fromTheStart(claim));
          note(
            `one claim of 100 due rows: ${fromBound.buffers} due-index buffers for ` +
              `${fromBound.rows} rows from the engine's bound; ${fromStart.buffers} from the start`,
          );
        }
      } finally {
        await holder.query('ROLLBACK').catch(() => undefined);
        await holder.end();
      }
      return [
        {
          figure: `held xmin, ${HELD_XMIN_EVENTS} events: burn-down vs without the hold`,
          value: `${count(held)} vs ${count(free)} events/s = ${times(held / free)}`,
          target: '≥ 0.8 ×',
        },
        {
          figure: `held xmin: ${RATE_PER_SECOND}/s p50 / p99 vs without the hold`,
          value:
            `${ms(heldLatency.p50)} / ${ms(heldLatency.p99)} vs ` +
            `${ms(freeLatency.p50)} / ${ms(freeLatency.p99)} = ` +
            `${times(heldLatency.p50 / freeLatency.p50)} / ${times(heldLatency.p99 / freeLatency.p99)}`,
          target: '≤ 2 × (p99)',
        },
        {
          figure: 'held xmin: due-index buffers a claim reads per row it returns',
          value: fromBound
            ? `${fromBound.buffers} / ${fromBound.rows} = ${times(fromBound.buffers / Math.max(1, fromBound.rows))}` +
              ` (from the start: ${times(fromStart!.buffers / Math.max(1, fromStart!.rows))})`
            : 'no claim recorded',
          target: '≤ 3 ×',
        },
      ];
    }),
};
