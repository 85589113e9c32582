import { createOutboxApp } from '../support/app';
import { describeBurnDown, timeBurnDown } from '../support/burn-down';
import { withFreshDatabase, type BenchDatabase } from '../support/database';
import { loadKeyed } from '../support/keyed-backlog';
import { count, ms, note, times } from '../support/report';
import type { Scenario } from './scenario';

const EVENTS = 2000;
const HANDLER_MS = 2;
/** One event at a time, each taking the handler's time and nothing else. */
const BOUND = 1000 / HANDLER_MS;
/** Past this the rate is taken over what was delivered so far. */
const CAP_MS = 20_000;
/** The least poll the module takes: a wake every 10 ms, as a settle that wakes an event could. */
const FAST_POLL = { tuning: { pollIntervalMs: 10 } };

/** EVENTS events of one key emitted beforehand, drained by the ordered 2 ms handler: events/s. */
async function drain(db: BenchDatabase, outbox: Record<string, unknown>): Promise<number> {
  const app = await createOutboxApp(db.url, { handler: 'ordered-2ms', autoStart: false, outbox });
  try {
    const label = `options ${JSON.stringify(outbox)}`;
    await loadKeyed(app, db.sql, EVENTS, () => 'the-key', label);
    const run = await timeBurnDown(app, db.sql, EVENTS, CAP_MS);
    note(`${label}: ${describeBurnDown(run, CAP_MS)}; ${ms(1000 / run.rate)} an event`);
    return run.rate;
  } finally {
    await app.close();
  }
}

/**
 * One key, an ordered handler of 2 ms: the key's events run one after another, so each costs the
 * handler plus the engine's time from one event's end to the next one's start (settle, wake,
 * claim). With the default options, then with a 10 ms poll that stands in for a prompt wake,
 * to tell the time lost waiting for a wake from the time spent per event.
 */
export const orderedOneKey: Scenario = {
  name: 'ordered-one-key',
  title: `${EVENTS} events of one key, ordered handler of ${HANDLER_MS} ms`,
  run: (server) =>
    withFreshDatabase(server, 'ordered_one_key', async (db) => {
      const rate = await drain(db, {});
      const polled = await drain(db, FAST_POLL);
      return [
        {
          figure: `one key, ordered handler of ${HANDLER_MS} ms: events/s vs ${count(BOUND)}/s`,
          value:
            `${count(rate)} events/s = ${times(rate / BOUND)} ` +
            `(tuning.pollIntervalMs 10: ${count(polled)}/s = ${times(polled / BOUND)})`,
          target: '≥ 0.8 ×',
        },
      ];
    }),
};
