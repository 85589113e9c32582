import { outboxMigrations } from '@app/outbox';
import { callsBy, tally } from '../support/counts';
import { migrate } from '../support/database';
import { drainAll } from '../support/drain';
import type { EmitReport, StreamReport } from '../support/ipc';
import { ms, type Scenario } from '../support/scenario';

const MAX_ATTEMPTS = 4;
/** Options both releases take: poison events die within seconds, and stay dead for the run. */
const OPTIONS = {
  maxAttempts: MAX_ATTEMPTS,
  deadRetryMs: 600_000,
  retry: { baseMs: 300, maxMs: 600, jitter: 0 },
  concurrency: 8,
  batchSize: 40,
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * An upgrade with the previous release running: its workers and producer work on its own schema,
 * the migrations of this code run while they claim and settle, this code's workers and producer
 * join them, and then the old ones are retired with SIGTERM, as a rolling deploy does. Poison
 * events emitted throughout (`fault-b` always throws for them) are dead or still retrying when
 * the schema changes under them: each must end dead after exactly `maxAttempts` attempts,
 * announced once, with `fault-a` run once. Nothing may be lost or delivered twice.
 */
export const mixedVersions: Scenario = {
  name: 'mixed-versions',
  title: 'the previous release and this code side by side through the migrations',
  previousRelease: true,
  async run(ctx, outcome) {
    const previous = ctx.previous!;
    const perSecond = ctx.quick ? 100 : 200;
    const phaseMs = ctx.quick ? 3000 : 8000;
    const poisonBatch = ctx.quick ? 4 : 10;
    let poisoned = 0;
    const emitPoison = async (producer: Awaited<ReturnType<typeof ctx.producer>>) => {
      const report = await producer.request<EmitReport>({
        cmd: 'emit',
        count: poisonBatch,
        batch: 1,
        kind: 'poison',
      });
      poisoned += report.committed;
    };

    const oldProducer = await previous.producer();
    const oldWorkers = await Promise.all(
      ['old-1', 'old-2'].map((label) => previous.worker(label, { outbox: OPTIONS })),
    );
    await oldProducer.request({ cmd: 'stream-start', perSecond, batch: 5 });
    await emitPoison(oldProducer);
    await sleep(phaseMs);
    // Some poison events dead by now, these still retrying when the schema changes.
    await emitPoison(oldProducer);
    const [before] = await ctx.db.query(
      `SELECT count(*) FILTER (WHERE e.dead_at IS NOT NULL)::int AS dead,
              count(*) FILTER (WHERE e.dead_at IS NULL AND e.attempts > 0)::int AS retrying
       FROM outbox_event e JOIN fault_emitted em ON em.event_id = e.id
       WHERE em.kind = 'poison'`,
    );
    const migratedAt = Date.now();
    // As a deploy job runs them beside live pods: each in its own transaction, index builds
    // concurrently outside one (what `nestjs-lease-outbox migrate` runs).
    const ran = await migrate(ctx.db.url, outboxMigrations({ concurrentIndexes: true }));
    ctx.note(`migrated under ${previous.version}: ${ran.join(', ') || 'nothing to run'}`);

    const newProducer = await ctx.producer();
    const newWorkers = await Promise.all(
      ['new-1', 'new-2'].map((label) => ctx.worker(label, { outbox: OPTIONS })),
    );
    await newProducer.request({ cmd: 'stream-start', perSecond, batch: 5 });
    await emitPoison(newProducer);
    await sleep(phaseMs);
    const oldCallsAfterMigration = (
      await Promise.all(oldWorkers.map((w) => callsBy(ctx.db, w.pid, migratedAt)))
    ).reduce((sum, n) => sum + n, 0);

    // Retired as a rolling deploy does: the old producer first, then each old worker.
    const oldStream = await oldProducer.request<StreamReport>({ cmd: 'stream-stop' }, 30_000);
    await oldProducer.stop();
    for (const worker of oldWorkers) await worker.stop();
    await emitPoison(newProducer);
    await sleep(phaseMs / 2);
    const newStream = await newProducer.request<StreamReport>({ cmd: 'stream-stop' }, 30_000);
    ctx.note(`old producer ${oldStream.committed}, new ${newStream.committed} events; draining`);
    const drainMs = await drainAll(ctx.db, 90_000);
    const newCalls = (
      await Promise.all(newWorkers.map((w) => callsBy(ctx.db, w.pid, migratedAt)))
    ).reduce((sum, n) => sum + n, 0);

    const [poison] = await ctx.db.query(
      `WITH p AS (
         SELECT e.id, e.dead_at, e.attempts,
                (SELECT count(*) FROM outbox_event d
                 WHERE d.type = 'outbox.event.dead' AND d.payload ->> 'eventId' = e.id::text) AS announced,
                (SELECT count(*) FROM fault_effect f WHERE f.event_id = e.id AND f.handler = 'fault-a') AS a_effects
         FROM outbox_event e JOIN fault_emitted em ON em.event_id = e.id
         WHERE em.kind = 'poison')
       SELECT count(*)::int AS events,
              count(*) FILTER (WHERE dead_at IS NOT NULL AND attempts = $1)::int AS dead_in_full,
              count(*) FILTER (WHERE announced = 1)::int AS announced_once,
              count(*) FILTER (WHERE a_effects = 1)::int AS a_once
       FROM p`,
      [MAX_ATTEMPTS],
    );

    outcome.figure('previous release', previous.version);
    outcome.figure('migrations run while it claimed', ran.length);
    outcome.figure(
      'events from the old producer / the new',
      `${oldStream.committed} / ${newStream.committed}`,
    );
    outcome.figure('old workers\u2019 calls after the migration', oldCallsAfterMigration);
    outcome.figure('new workers\u2019 calls', newCalls);
    outcome.figure('poison events', poison.events);
    outcome.figure('drain after the old pods left', ms(drainMs));
    outcome.tally(await tally(ctx.db), { deadExpected: true });
    outcome.check('the migrations ran mid-run', ran.length > 0, ran.length);
    outcome.check(
      'poison events dead / retrying as the migrations began',
      before.dead > 0 && before.retrying > 0,
      `${before.dead} / ${before.retrying}`,
    );
    outcome.check(
      'old workers went on claiming on the new schema',
      oldCallsAfterMigration > 0,
      oldCallsAfterMigration,
    );
    outcome.check('new workers delivered', newCalls > 0, newCalls);
    outcome.check(
      `poison events dead after exactly ${MAX_ATTEMPTS} attempts`,
      poison.dead_in_full === poisoned,
      `${poison.dead_in_full}/${poisoned}`,
    );
    outcome.check(
      'each poison event announced once',
      poison.announced_once === poisoned,
      `${poison.announced_once}/${poisoned}`,
    );
    outcome.check(
      'fault-a ran once per poison event',
      poison.a_once === poisoned,
      `${poison.a_once}/${poisoned}`,
    );
    outcome.summary.recover = `drain ${ms(drainMs)}`;
  },
};
