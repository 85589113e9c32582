import { CLAIM as CLAIM_ANY, CLAIM_LIVE, CLAIM_LIVE_CALL } from '@app/outbox/store/lease/claim.sql';
import { RELEASE } from '@app/outbox/store/lease/release.sql';
import { MARK_DELIVERED, MARK_FAILED } from '@app/outbox/store/lease/settle.sql';
import { tally } from '../support/counts';
import type { FaultDatabase } from '../support/database';
import { drainAll } from '../support/drain';
import type { StreamReport } from '../support/ipc';
import { Crew } from '../support/crew';
import { sleep } from '../support/processes';
import { ms, type Scenario } from '../support/scenario';
import { RECORDS_APPLICATION_NAME, WORKER_APPLICATION_NAME } from '../support/worker-app';

/**
 * Statements of the outbox, told apart by how their text begins (pg_stat_activity keeps only the
 * first 1 kB of a statement, and these are longer).
 */
const opening = (sql: string) =>
  `%${sql
    .trim()
    .slice(0, 40)
    .replace(/[%_\\]/g, '\\$&')}%`;
const CLAIM = [CLAIM_ANY, CLAIM_LIVE, CLAIM_LIVE_CALL].map(opening);
const SETTLE = [MARK_DELIVERED, MARK_FAILED, RELEASE].map(opening);

/**
 * Terminates every backend of the workers (outbox pool, LISTEN connection, handler records) in
 * the same statement that sees one of them running the target statement, so the kill lands
 * mid-claim or mid-settle. The producer's sessions are spared: what it commits is the baseline.
 */
const TERMINATE = `
  WITH workers AS (
    SELECT pid, state, query
    FROM pg_stat_activity
    WHERE datname = current_database()
      AND pid <> pg_backend_pid()
      AND application_name IN ($1, 'outbox-listener', $2)
  )
  SELECT state = 'active' AND query LIKE ANY ($5::text[]) AS claim,
         state = 'active' AND query LIKE ANY ($6::text[]) AS settle,
         pg_terminate_backend(pid) AS terminated
  FROM workers
  WHERE $3 OR EXISTS (
    SELECT 1 FROM workers WHERE state = 'active' AND query LIKE ANY ($4::text[]))
`;

interface Cut {
  claim: boolean;
  settle: boolean;
  terminated: boolean;
}

async function terminateDuring(db: FaultDatabase, patterns: string[], force: boolean) {
  return db.query<Cut>(TERMINATE, [
    WORKER_APPLICATION_NAME,
    RECORDS_APPLICATION_NAME,
    force,
    patterns,
    CLAIM,
    SETTLE,
  ]);
}

export const terminateBackends: Scenario = {
  name: 'terminate-backends',
  title: 'every worker backend terminated, repeatedly, mid-claim and mid-settle',
  async run(ctx, outcome) {
    const rounds = ctx.quick ? 12 : 36;
    const producer = await ctx.producer();
    const crew = new Crew(['worker-1', 'worker-2'], (label) =>
      ctx.spawnWorker(label, { handlerDelayMs: 5 }),
    );
    await crew.ready();
    await producer.request({ cmd: 'stream-start', perSecond: 150, batch: 5 });
    await sleep(1000);

    let terminated = 0;
    let claimsCut = 0;
    let settlesCut = 0;
    let untargeted = 0;
    for (let round = 0; round < rounds; round++) {
      await sleep(150 + Math.random() * 250);
      const patterns = round % 2 === 0 ? CLAIM : SETTLE;
      // Look for the target statement for up to 1.5 s, then terminate whatever is there.
      const deadline = Date.now() + 1500;
      let cut: Cut[] = [];
      while (cut.length === 0) {
        const force = Date.now() > deadline;
        cut = await terminateDuring(ctx.db, patterns, force);
        if (force) {
          untargeted++;
          break;
        }
      }
      await crew.replaceCrashed();
      terminated += cut.filter((c) => c.terminated).length;
      claimsCut += cut.filter((c) => c.claim).length;
      settlesCut += cut.filter((c) => c.settle).length;
    }
    const stream = await producer.request<StreamReport>({ cmd: 'stream-stop' }, 30_000);
    ctx.note(`${rounds} rounds: ${terminated} backends terminated; draining`);
    const drainMs = await drainAll(ctx.db, 60_000);

    await crew.replaceCrashed();
    outcome.figure('rounds', rounds);
    outcome.figure('backends terminated', terminated);
    outcome.figure('  running a claim', claimsCut);
    outcome.figure('  running a settle (delivered, failed or release)', settlesCut);
    outcome.figure('rounds without the target statement seen', untargeted);
    outcome.figure('producer batches failed', stream.failedBatches);
    outcome.figure('drain after the last round', ms(drainMs));
    outcome.tally(await tally(ctx.db));
    outcome.checkZero('worker processes that crashed (replaced to go on)', crew.crashed.length);
    if (crew.crashed.length > 0) outcome.note(`crash: ${crew.reasons()}`);
    outcome.check('claims cut by a termination', claimsCut > 0, claimsCut);
    outcome.check('settles cut by a termination', settlesCut > 0, settlesCut);
    outcome.summary.recover = `drain ${ms(drainMs)}`;
  },
};
