import { tally } from '../support/counts';
import { drainAll } from '../support/drain';
import type { EmitReport } from '../support/ipc';
import { waitUntil } from '../support/processes';
import type { Scenario } from '../support/scenario';

const MAX_ATTEMPTS = 4;
/** The least the module allows, so dead events are replayed (and fail again) within the scenario. */
const DEAD_RETRY_MS = 1000;

/**
 * Poison events among healthy ones: `fault-b` always throws for them, `fault-a` succeeds. They
 * must become dead after `maxAttempts`, be announced once each (also across the dead replays
 * that follow), never rerun `fault-a` (recorded in `deliveries` on the first attempt), and
 * leave the healthy events untouched: one call per handler, since nothing else fails.
 */
export const poison: Scenario = {
  name: 'poison',
  title: 'poison events: dead after maxAttempts, announced once, other handlers once',
  async run(ctx, outcome) {
    const healthy = ctx.quick ? 150 : 600;
    const poisoned = ctx.quick ? 8 : 30;
    const producer = await ctx.producer();
    const options = {
      maxAttempts: MAX_ATTEMPTS,
      deadRetryMs: DEAD_RETRY_MS,
      retry: { baseMs: 50, maxMs: 200, jitter: 0 },
    };
    const workers = await Promise.all(
      ['worker-1', 'worker-2'].map((label) => ctx.worker(label, { outbox: options })),
    );
    // Interleaved, so poison and healthy events share claims.
    for (let round = 0; round < 2; round++) {
      await producer.request<EmitReport>({
        cmd: 'emit',
        count: healthy / 2,
        batch: 25,
        kind: 'work',
      });
      await producer.request<EmitReport>({
        cmd: 'emit',
        count: poisoned / 2,
        batch: 1,
        kind: 'poison',
      });
    }
    await drainAll(ctx.db, 60_000);
    // Two replays of every dead event: each fails again and must announce nothing.
    const replayed = await waitUntil(async () => {
      const [row] = await ctx.db.query(
        `SELECT count(*)::int AS n FROM outbox_event e JOIN fault_emitted em ON em.event_id = e.id
         WHERE em.kind = 'poison' AND e.attempts >= $1 AND e.lease_expires_at IS NULL`,
        [MAX_ATTEMPTS + 2],
      );
      return row.n === poisoned;
    }, 30_000);
    await Promise.all(workers.map((w) => w.stop()));

    const [poisonRow] = await ctx.db.query(
      `WITH p AS (
         SELECT e.id, e.dead_at, e.attempts,
                (SELECT count(*) FROM outbox_event d
                 WHERE d.type = 'outbox.event.dead' AND d.payload ->> 'eventId' = e.id::text) AS announced,
                (SELECT count(*) FROM fault_call c WHERE c.event_id = e.id AND c.handler = 'fault-a') AS a_calls,
                (SELECT count(*) FROM fault_effect f WHERE f.event_id = e.id AND f.handler = 'fault-a') AS a_effects,
                (SELECT count(*) FROM fault_call c WHERE c.event_id = e.id AND c.handler = 'fault-b') AS b_calls,
                (SELECT count(*) FROM fault_effect f WHERE f.event_id = e.id AND f.handler = 'fault-b') AS b_effects
         FROM outbox_event e JOIN fault_emitted em ON em.event_id = e.id
         WHERE em.kind = 'poison')
       SELECT count(*) FILTER (WHERE dead_at IS NOT NULL)::int AS dead,
              count(*) FILTER (WHERE announced = 1)::int AS announced_once,
              coalesce(sum(announced), 0)::int AS announcements,
              count(*) FILTER (WHERE a_calls = 1 AND a_effects = 1)::int AS a_once,
              coalesce(sum(b_effects), 0)::int AS b_effects,
              min(b_calls)::int AS b_calls_min, max(b_calls)::int AS b_calls_max,
              min(attempts)::int AS attempts_min, max(attempts)::int AS attempts_max
       FROM p`,
    );
    const [deadAudit] = await ctx.db.query(
      `SELECT count(*)::int AS calls, count(DISTINCT event_id)::int AS announcements
       FROM fault_call WHERE handler = 'fault-dead'`,
    );
    const [healthyRow] = await ctx.db.query(
      `SELECT count(*)::int AS events,
              count(*) FILTER (WHERE e.dispatched_at IS NOT NULL AND e.attempts = 1 AND e.last_error IS NULL)::int AS clean,
              count(*) FILTER (WHERE (SELECT count(*) FROM fault_call c WHERE c.event_id = e.id) = 2)::int AS two_calls
       FROM outbox_event e JOIN fault_emitted em ON em.event_id = e.id WHERE em.kind = 'work'`,
    );
    const t = await tally(ctx.db);

    outcome.figure('healthy events', healthy);
    outcome.figure('poison events (fault-b always throws)', poisoned);
    outcome.figure('maxAttempts / deadRetryMs', `${MAX_ATTEMPTS} / ${DEAD_RETRY_MS} ms`);
    outcome.figure(
      'poison attempts incl. dead replays (min..max)',
      `${poisonRow.attempts_min}..${poisonRow.attempts_max}`,
    );
    outcome.figure(
      'fault-b calls per poison event (min..max)',
      `${poisonRow.b_calls_min}..${poisonRow.b_calls_max}`,
    );
    outcome.figure('outbox.event.dead announcements', poisonRow.announcements);
    outcome.tally(t, { deadExpected: true });
    outcome.check(
      'poison events dead',
      poisonRow.dead === poisoned,
      `${poisonRow.dead}/${poisoned}`,
    );
    outcome.check(
      'dead replays ran (attempts beyond maxAttempts)',
      replayed,
      `${poisonRow.attempts_max}`,
    );
    outcome.check(
      'each announced exactly once',
      poisonRow.announced_once === poisoned && poisonRow.announcements === poisoned,
      `${poisonRow.announced_once}/${poisoned} once, ${poisonRow.announcements} in all`,
    );
    outcome.check(
      'announcements handled once each (fault-dead)',
      deadAudit.calls === poisoned && deadAudit.announcements === poisoned,
      `${deadAudit.calls} calls for ${deadAudit.announcements}`,
    );
    outcome.check(
      'fault-a ran once with one effect per poison event',
      poisonRow.a_once === poisoned,
      `${poisonRow.a_once}/${poisoned}`,
    );
    outcome.checkZero('fault-b effects on poison events', poisonRow.b_effects);
    outcome.check(
      'healthy events delivered on the first attempt',
      healthyRow.clean === healthy,
      `${healthyRow.clean}/${healthy}`,
    );
    outcome.check(
      'healthy events: one call per handler',
      healthyRow.two_calls === healthy,
      `${healthyRow.two_calls}/${healthy}`,
    );
    outcome.checkZero('extra calls (none expected)', t.extraCalls);
    outcome.check('only poison events dead', t.dead === poisoned, t.dead);
    outcome.summary.recover = `${poisonRow.announcements} announced`;
  },
};
