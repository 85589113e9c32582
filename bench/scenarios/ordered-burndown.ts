import type { Client } from 'pg';
import { createOutboxApp } from '../support/app';
import { describeBurnDown, timeBurnDown, type BurnDown } from '../support/burn-down';
import { EVENTS } from '../support/config';
import { withFreshDatabase } from '../support/database';
import type { HandlerKind } from '../support/handlers';
import { loadKeyed } from '../support/keyed-backlog';
import { count, note, times } from '../support/report';
import type { Scenario } from './scenario';

const KEYS = 1000;
const TIMEOUT_MS = 120_000;

/**
 * EVENTS events over KEYS keys (event i in key i mod KEYS, so each key's events are spread over
 * the whole backlog), emitted through the publisher of an app whose one handler is `handler`,
 * then drained by that app.
 */
async function drain(url: string, sql: Client, handler: HandlerKind): Promise<BurnDown> {
  const app = await createOutboxApp(url, { handler, autoStart: false });
  try {
    await loadKeyed(app, sql, EVENTS, (i) => `key-${i % KEYS}`, handler);
    const run = await timeBurnDown(app, sql, EVENTS, TIMEOUT_MS);
    note(`${handler}: ${describeBurnDown(run, TIMEOUT_MS)}`);
    return run;
  } finally {
    await app.close();
  }
}

/**
 * No-op burn-down over KEYS keys: the ordered no-op handler (each key's events one at a time,
 * the next woken by the settle of the one before) against the same handler unordered, on the
 * same backlog emitted the same way, in the same database.
 */
export const orderedBurndown: Scenario = {
  name: 'ordered-burndown',
  title: `no-op burn-down of ${EVENTS} events over ${KEYS} keys, ordered vs unordered`,
  run: (server) =>
    withFreshDatabase(server, 'ordered_burndown', async (db) => {
      const ordered = await drain(db.url, db.sql, 'ordered-noop');
      const unordered = await drain(db.url, db.sql, 'noop');
      return [
        {
          figure: `ordered no-op burn-down over ${KEYS} keys vs unordered`,
          value: `${count(ordered.rate)} vs ${count(unordered.rate)} events/s = ${times(ordered.rate / unordered.rate)}`,
          target: '≥ 0.7 ×',
        },
      ];
    }),
};
