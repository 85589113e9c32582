import { tally } from '../support/counts';
import { drainAll } from '../support/drain';
import { HANDLER_AUDIT, HANDLER_LEDGER } from '../support/fault-handlers';
import type { KeyedTransaction, StreamReport } from '../support/ipc';
import { killInTurn, median, type KillRounds } from '../support/kill-loop';
import type { BlockedKey, BlockedKeyList } from '@app/outbox';
import { orderingFindings, type OrderingFindings } from '../support/ordering-checks';
import { waitUntil, type FaultChild } from '../support/processes';
import { KEY_AGGREGATE } from '../support/producer';
import { ms, type Outcome, type Scenario, type ScenarioContext } from '../support/scenario';

const KEYS = 50;
/** Producer loops of phase 1, each committing its transactions one after another. */
const PRODUCERS = 3;
/** Phase 2's key with a poison event, and the transaction of the key that holds it. */
const POISON_KEY = 'b00';
const POISON_ROUND = 1;
const MAX_ATTEMPTS = 2;

/**
 * Per-key ordering across processes. Phase 1: two workers, SIGKILLed in turn every few seconds
 * and replaced, with a short lease, while three producer loops emit into 50 keys (a quarter of
 * the transactions hold two events of their key); the ordered handler `fault-ledger` fails a
 * fifth of its first tries, `fault-audit` runs the same events unordered. Phase 2: fresh workers
 * with maxAttempts 2, a poison event in one key (`fault-ledger` always throws for it): it must
 * die and block its key alone, listed blocked with the events behind it waiting, while the 49
 * other keys drain and `fault-audit` delivers everything; a discard of the head releases the
 * key, whose queue then drains in order. Then, for every key over both phases (see
 * ordering-checks.ts): the ledger's runs started in commit order, none before the event ahead
 * was delivered (or discarded), none overlapping another run of the key but for runs of killed
 * processes, and nothing lost.
 */
export const ordering: Scenario = {
  name: 'ordering',
  title: 'per-key order through SIGKILLs and flaky first tries; a dead head blocks until discarded',
  async run(ctx, outcome) {
    const producer = await ctx.producer();
    const first = await underKills(ctx, producer);
    const second = await poisonedKey(ctx, producer);
    const findings = await orderingFindings(ctx.db, first.rounds.killed);
    const t = await tally(ctx.db);

    outcome.figure('keys (both phases) / producer loops', `${findings.keys} / ${PRODUCERS}`);
    outcome.figure('workers (at any time) / SIGKILLs', `2 / ${first.rounds.kills}`);
    outcome.figure('  with handlers running', first.rounds.midHandler);
    outcome.figure('worker boot (median)', ms(median(first.rounds.bootTimes)));
    outcome.figure('phase 1 events / producer batches failed', `${first.events} / ${first.failed}`);
    outcome.figure('phase 1 drain after the last kill', ms(first.drainMs));
    outcome.figure('ledger runs failed on purpose (flaky, poison)', findings.failedRuns);
    outcome.figure('ledger runs ended by a SIGKILL', findings.killedRuns);
    outcome.figure(
      'ledger hand-off to the next event of a key (median / p99 / max)',
      findings.handoffMs.map(ms).join(' / '),
    );
    outcome.figure('phase 2 events behind the dead head', second.behind);
    outcome.figure(
      'phase 2: other keys drained (from the first emit) / key released',
      `${ms(second.othersMs)} / ${ms(second.releaseMs)}`,
    );
    outcome.tally(t, { deadExpected: true });
    orderChecks(outcome, findings);
    poisonChecks(outcome, second);
    outcome.check('only the discarded head dead', t.dead === 1, t.dead);
    outcome.check(
      'kills landed while handlers ran',
      first.rounds.midHandler > 0,
      first.rounds.midHandler,
    );
    outcome.summary.recover = `drain ${ms(first.drainMs)}, release ${ms(second.releaseMs)}`;
  },
};

interface UnderKills {
  rounds: KillRounds;
  events: number;
  failed: number;
  drainMs: number;
}

/** Phase 1: keyed events from three loops while the two workers are SIGKILLed in turn. */
async function underKills(ctx: ScenarioContext, producer: FaultChild): Promise<UnderKills> {
  const options = {
    handlerDelayMs: 40,
    outbox: { leaseMs: 2500, handlerTimeoutMs: 1000, concurrency: 8, batchSize: 40 },
  };
  let next = 0;
  const spawn = () => ctx.spawnWorker(`worker-${++next}`, options);
  const workers = [spawn(), spawn()];
  await Promise.all(workers.map((w) => w.ready()));
  await producer.request({
    cmd: 'keyed-stream-start',
    producers: PRODUCERS,
    perSecond: ctx.quick ? 40 : 60,
    keys: KEYS,
    pairShare: 0.25,
    flakyShare: 0.2,
  });
  const rounds = await killInTurn(workers, spawn, ctx.quick ? 4 : 12, [1000, 3000]);
  const stream = await producer.request<StreamReport>({ cmd: 'stream-stop' }, 30_000);
  ctx.note(`${rounds.kills} kills done, ${stream.committed} events emitted; draining`);
  const drainMs = await drainAll(ctx.db, 90_000);
  await Promise.all(workers.map((w) => w.stop()));
  return { rounds, events: stream.committed, failed: stream.failedBatches, drainMs };
}

interface PoisonedKey {
  behind: number;
  /** The blocked keys while the head was dead, and after the discard. */
  blocked: BlockedKey[];
  blockedAfter: BlockedKey[];
  poisonId: string;
  /** The head died and every other key drained within the wait. */
  settled: boolean;
  /** Ledger calls of the events behind the head before the discard. */
  ranBehind: number;
  /** The poison event's and the events behind it that fault-audit had not delivered by then. */
  unaudited: number;
  ledgerPoisonCalls: number;
  discarded: number;
  othersMs: number;
  releaseMs: number;
}

/** Phase 2: a poison event blocks its key until it is discarded; the other keys go on. */
async function poisonedKey(ctx: ScenarioContext, producer: FaultChild): Promise<PoisonedKey> {
  const outbox = { maxAttempts: MAX_ATTEMPTS, retry: { baseMs: 50, maxMs: 200, jitter: 0 } };
  const workers = await Promise.all(
    ['worker-b1', 'worker-b2'].map((label) => ctx.worker(label, { handlerDelayMs: 5, outbox })),
  );
  const transactions: KeyedTransaction[] = [];
  for (let round = 0; round < (ctx.quick ? 5 : 10); round++) {
    for (let k = 0; k < KEYS; k++) {
      const key = `b${String(k).padStart(2, '0')}`;
      const poison = key === POISON_KEY && round === POISON_ROUND;
      const count = !poison && (round + k) % 4 === 0 ? 2 : 1;
      transactions.push({ key, count, kind: poison ? 'ordered-poison' : 'ordered' });
    }
  }
  const behind = transactions
    .filter((t, index) => t.key === POISON_KEY && index > POISON_ROUND * KEYS)
    .reduce((sum, t) => sum + t.count, 0);
  const startedAt = Date.now();
  await producer.request({ cmd: 'emit-keyed', producer: PRODUCERS, transactions }, 60_000);
  const [{ event_id: poisonId }] = await ctx.db.query(
    `SELECT event_id FROM fault_emitted WHERE kind = 'ordered-poison'`,
  );
  // The head dead, and every other key drained.
  const settled = await waitUntil(async () => {
    const [row] = await ctx.db.query(
      `SELECT (SELECT dead_at IS NOT NULL FROM outbox_event WHERE id = $1) AS dead,
              (SELECT count(*) FROM outbox_event
               WHERE dispatched_at IS NULL AND dead_at IS NULL
                 AND (aggregate_type, aggregate_id) IS DISTINCT FROM ($2, $3))::int AS others`,
      [poisonId, KEY_AGGREGATE, POISON_KEY],
    );
    return row.dead && row.others === 0;
  }, 60_000);
  const othersMs = Date.now() - startedAt;
  // A while longer: the key stays blocked by itself.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const blockedKeys = async () =>
    (await workers[0].request<BlockedKeyList>({ cmd: 'blocked-keys' })).items;
  const blocked = await blockedKeys();
  // The poison key's events from the head on, known by their aggregate and the order the
  // producer committed them in, whatever the outbox made of their key.
  const [row] = await ctx.db.query(
    `WITH head_on AS (
       SELECT e.id, e.deliveries FROM outbox_event e JOIN fault_emitted em ON em.event_id = e.id
       WHERE e.aggregate_type = $2 AND e.aggregate_id = $3
         AND em.emitted_at >= (SELECT emitted_at FROM fault_emitted WHERE event_id = $1))
     SELECT (SELECT count(*) FROM fault_call c JOIN head_on h ON h.id = c.event_id
             WHERE c.handler = $4 AND h.id <> $1)::int AS ran_behind,
            (SELECT count(*) FROM fault_call c
             WHERE c.handler = $4 AND c.event_id = $1)::int AS ledger_poison_calls,
            (SELECT count(*) FROM head_on WHERE NOT deliveries ? $5)::int AS unaudited`,
    [poisonId, KEY_AGGREGATE, POISON_KEY, HANDLER_LEDGER, HANDLER_AUDIT],
  );
  const discardedAt = Date.now();
  const change = await workers[0].request<{ count: number }>({
    cmd: 'discard',
    ids: [poisonId],
    reason: 'fault suite: the poison head of its key',
  });
  const drained = Number.isFinite(await drainAll(ctx.db, 60_000));
  const blockedAfter = await blockedKeys();
  // From the discard to the last delivery of the key, on the database clock.
  const [released] = await ctx.db.query(
    `SELECT (extract(epoch FROM max((e.deliveries ->> $2)::timestamptz) - p.discarded_at)
             * 1000)::float8 AS ms
     FROM outbox_event p JOIN outbox_event e ON e.ordering_key = p.ordering_key
     WHERE p.id = $1 GROUP BY p.discarded_at`,
    [poisonId, HANDLER_LEDGER],
  );
  const releaseMs: number = drained ? (released?.ms ?? NaN) : NaN;
  ctx.note(`head discarded after ${ms(discardedAt - startedAt)}; key released in ${ms(releaseMs)}`);
  await Promise.all(workers.map((w) => w.stop()));
  return {
    behind,
    blocked,
    blockedAfter,
    poisonId,
    settled,
    ranBehind: row.ran_behind,
    unaudited: row.unaudited,
    ledgerPoisonCalls: row.ledger_poison_calls,
    discarded: change.count,
    othersMs,
    releaseMs,
  };
}

function orderChecks(outcome: Outcome, f: OrderingFindings): void {
  const zeros: Array<[string, number]> = [
    ['ordered events without a key position', f.unplaced],
    ['positions against a producer loop’s commits', f.placedAgainstCommits],
    ['ledger runs started before the event ahead was delivered', f.earlyStarts],
    ['ledger runs overlapping a run of their key', f.overlaps],
    ['ledger runs unfinished by a live process', f.unfinished],
    ['keys whose delivering runs left commit order', f.keysOutOfOrder],
    ['deliveries without a successful run before them', f.deliveredUnseen],
    ['events neither delivered to the ledger nor discarded', f.unreleased],
    ['events fault-audit did not deliver', f.unaudited],
  ];
  for (const [what, actual] of zeros) outcome.checkZero(what, actual);
  outcome.check('events discarded (the poison head)', f.discarded === 1, f.discarded);
  for (const line of f.details) outcome.note(line);
}

function poisonChecks(outcome: Outcome, p: PoisonedKey): void {
  const [item] = p.blocked;
  outcome.check('head dead and the 49 other keys drained', p.settled, p.settled ? 'yes' : 'no');
  outcome.check(
    'ledger tries of the poison head = maxAttempts',
    p.ledgerPoisonCalls === MAX_ATTEMPTS,
    p.ledgerPoisonCalls,
  );
  outcome.check(
    'blocked: that key alone, at the head, the rest waiting',
    p.blocked.length === 1 &&
      item.handler === HANDLER_LEDGER &&
      item.key === `${KEY_AGGREGATE}:${POISON_KEY}` &&
      item.eventId === p.poisonId &&
      item.waiting === p.behind,
    p.blocked.map((b) => `${b.key} ${b.handler} waiting ${b.waiting}`).join(', ') || 'none',
  );
  outcome.checkZero('ledger runs behind the dead head before the discard', p.ranBehind);
  outcome.checkZero('head and later events fault-audit had not delivered', p.unaudited);
  outcome.check('discard of the head', p.discarded === 1, p.discarded);
  outcome.check('key released: drained after the discard', p.releaseMs >= 0, ms(p.releaseMs));
  outcome.checkZero('keys blocked after the discard', p.blockedAfter.length);
}
