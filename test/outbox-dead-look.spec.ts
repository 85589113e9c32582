import { Injectable, type INestApplication } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent } from '@app/outbox';
import { useTestDatabase } from './support/test-database';
import { createOutboxApp, emitCommitted, eventually } from './support/outbox-app';
import { eventsOn } from './support/events';

/**
 * Claims of live rows alone, through the real module: while claims keep coming back full of live
 * work, a due dead replay is still claimed within about a second, not when the backlog ends or
 * at the next poll.
 */

const LIVE_EVENTS = 800;
/** Two slots of 4 ms each: the backlog lasts well over a second, whatever the machine. */
const HANDLER_MS = 4;

const runs: Array<{ id: string; liveLeft: number }> = [];
let liveRuns = 0;

@Injectable()
class Worker {
  @OnOutboxEvent('work', { events: ['job.queued'] })
  async handle(event: OutboxEvent) {
    if (event.aggregateId !== 'replayed') liveRuns++;
    runs.push({ id: event.id, liveLeft: LIVE_EVENTS - liveRuns });
    await new Promise((resolve) => setTimeout(resolve, HANDLER_MS));
  }
}

const database = useTestDatabase({ truncateEach: ['outbox_event'] });
let app: INestApplication | undefined;

beforeEach(() => {
  runs.length = 0;
  liveRuns = 0;
});

afterEach(async () => {
  await app?.close();
  app = undefined;
});

const emit = (aggregateIds: string[]) => emitCommitted(app!, eventsOn('job.queued', aggregateIds));

it('a dead replay that falls due while claims keep coming back full of live rows runs before the backlog ends', async () => {
  app = await createOutboxApp({
    url: database.db.url,
    // Small claims that always come back full; the poll, which would look for dead rows too,
    // never comes within the test.
    outbox: {
      concurrency: 2,
      tuning: { batchSize: 5, localQueue: { size: 10 }, pollIntervalMs: 600_000 },
      retention: { enabled: false },
    },
    providers: [Worker],
  });
  // Dead, its replay not due yet: the first claims, which look for dead rows, leave it.
  const [deadId] = await emit(['replayed']);
  await database.sql.query(
    `UPDATE outbox_event
     SET dead_at = now(), attempts = 3, next_attempt_at = now() + interval '1 hour'
     WHERE id = $1`,
    [deadId],
  );
  await emit(Array.from({ length: LIVE_EVENTS }, (_, i) => `live-${i}`));
  await eventually('the first live events run', () => liveRuns >= 50);
  // Its replay falls due as the clock passes it would: no NOTIFY, no wake.
  await database.sql.query(`UPDATE outbox_event SET next_attempt_at = now() WHERE id = $1`, [
    deadId,
  ]);

  await eventually('the replay runs', () => runs.some((run) => run.id === deadId));
  const replay = runs.find((run) => run.id === deadId)!;
  expect(replay.liveLeft).toBeGreaterThan(0);
  await eventually('every live event runs', () => liveRuns === LIVE_EVENTS);
});
