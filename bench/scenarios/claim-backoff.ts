import * as SQL from '../../libs/outbox/src/store/lease/claim.sql';
import { rowsRead, tableScans, type PlanNode } from '../../test/support/query-plans';
import { captureClaim } from '../support/claim-capture';
import { rolledBack, timeClaim } from '../support/claim-timing';
import { BACKOFF_ROWS } from '../support/config';
import { insertEvents, withFreshDatabase } from '../support/database';
import { median } from '../support/percentiles';
import { count, describeError, ms, note, times, type Figure } from '../support/report';
import type { Scenario } from './scenario';

const DUE = 100;
const TIMED_CLAIMS = 20;

/**
 * The claim with BACKOFF_ROWS live rows resting in backoff (next attempt in an hour, older than
 * the due ones) and 100 due: rows its scans on outbox_event read per row claimed (EXPLAIN
 * ANALYZE), and its median time against the same claim on a table holding only the 100 due rows.
 * The statement is the library's CLAIM (store/lease/claim.sql.ts) as its repository sends it for 100 rows, a
 * 60 s lease and a 6 h dead retry (see `captureClaim`), each run in a transaction rolled back.
 */
export const claimBackoff: Scenario = {
  name: 'claim-backoff',
  title: `claim with ${BACKOFF_ROWS} rows in backoff and ${DUE} due`,
  run: async (server) => {
    const claim = (SQL as Record<string, unknown>).CLAIM;
    if (typeof claim !== 'string') {
      return unavailable('store/lease/claim.sql.ts exports no CLAIM statement');
    }
    try {
      return await withFreshDatabase(server, 'claim_backlog', (backlog) =>
        withFreshDatabase(server, 'claim_due_only', async (dueOnly) => {
          const took = await insertEvents(backlog.sql, BACKOFF_ROWS + DUE, {
            nextAttemptAt: `CASE WHEN g < ${BACKOFF_ROWS} THEN now() + interval '1 hour' ELSE now() END`,
            attempts: `CASE WHEN g < ${BACKOFF_ROWS} THEN 3 ELSE 0 END`,
          });
          note(`inserted ${count(BACKOFF_ROWS + DUE)} rows in ${(took / 1000).toFixed(1)} s`);
          await insertEvents(dueOnly.sql, DUE, { first: BACKOFF_ROWS });
          await backlog.sql.query('ANALYZE outbox_event');
          await dueOnly.sql.query('ANALYZE outbox_event');
          const sent = await captureClaim(dueOnly.url, claim);
          note(
            sent.how === 'fallback'
              ? `the repository's claim was not seen; CLAIM with ${sent.shown}`
              : `CLAIM as the repository sends it (${sent.how}): ${sent.shown}`,
          );

          const [{ 'QUERY PLAN': plans }] = await rolledBack(backlog.sql, async () => {
            const { rows } = await backlog.sql.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(
              `EXPLAIN (ANALYZE, FORMAT JSON) ${sent.text}`,
              sent.values,
            );
            return rows;
          });
          const plan = plans[0].Plan;
          const claimed = plan['Actual Rows'] ?? 0;
          const scans = tableScans(plan);
          const read = scans.reduce((sum, scan) => sum + rowsRead(scan), 0);
          for (const node of scans) {
            note(
              `${node['Node Type']}${node['Index Name'] ? ` using ${node['Index Name']}` : ''}: ` +
                `${count(rowsRead(node))} rows read (${count(node['Rows Removed by Filter'] ?? 0)} removed by filter per loop)`,
            );
          }
          note(`rows read on outbox_event ${count(read)} for ${count(claimed)} claimed`);

          await timeClaim(backlog.sql, sent);
          await timeClaim(dueOnly.sql, sent);
          const withBacklog: number[] = [];
          const alone: number[] = [];
          for (let i = 0; i < TIMED_CLAIMS; i++) {
            withBacklog.push(await timeClaim(backlog.sql, sent));
            alone.push(await timeClaim(dueOnly.sql, sent));
          }
          const a = median(withBacklog);
          const b = median(alone);
          note(
            `median of ${TIMED_CLAIMS} claims: ${ms(a)} with the backlog, ${ms(b)} with only the due rows`,
          );
          return [
            {
              figure: `claim, ${count(BACKOFF_ROWS)} in backoff + ${DUE} due: rows read per row claimed`,
              value: `${count(read)} / ${count(claimed)} = ${times(read / claimed)}`,
              target: '≤ 2 ×',
            },
            {
              figure: `claim, ${count(BACKOFF_ROWS)} in backoff + ${DUE} due: median time vs ${DUE} due only`,
              value: `${ms(a)} vs ${ms(b)} = ${times(a / b)}`,
              target: '≤ 2 ×',
            },
          ];
        }),
      );
    } catch (error) {
      return unavailable(describeError(error));
    }
  },
};

function unavailable(reason: string): Figure[] {
  note(`n/a: ${reason}`);
  return [
    {
      figure: `claim, ${count(BACKOFF_ROWS)} in backoff + ${DUE} due: rows read per row claimed`,
      value: `n/a (${reason})`,
      target: '≤ 2 ×',
    },
    {
      figure: `claim, ${count(BACKOFF_ROWS)} in backoff + ${DUE} due: median time vs ${DUE} due only`,
      value: 'n/a',
      target: '≤ 2 ×',
    },
  ];
}
