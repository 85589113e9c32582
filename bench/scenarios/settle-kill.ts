import { performance } from 'node:perf_hooks';
import * as SQL from '../../libs/outbox/src/store/lease/settle.sql';
import { EVENTS } from '../support/config';
import {
  countDelivered,
  harnessClient,
  insertEvents,
  sleep,
  withFreshDatabase,
} from '../support/database';
import { KillRounds, ROUNDS, SETTLE_FRAGMENT } from '../support/kill-rounds';
import { RelayProcess } from '../support/relay-process';
import type { RelayRuns } from '../support/relay-ipc';
import { count, describeError, note } from '../support/report';
import type { Scenario } from './scenario';

const KILL_EVENTS = Math.round(EVENTS / 2);
/** Short leases, so rows whose settle was lost come back within the run. */
const OUTBOX = { leaseMs: 6000, handlerTimeoutMs: 500 };
const DEADLINE_MS = 120_000;

/**
 * A burn-down of KILL_EVENTS no-op events by a relay process whose settle connection is
 * terminated up to 100 times, a kill round per hundredth of the events handled: how many kills
 * hit a settle, how many events ran more than once, how many were delivered, and whether the relay
 * survived.
 */
export const settleKill: Scenario = {
  name: 'settle-kill',
  title: `burn-down of ${KILL_EVENTS} events with the settle connection killed ${ROUNDS} times`,
  run: (server) =>
    withFreshDatabase(server, 'settle_kill', async (db) => {
      const settle = (SQL as Record<string, unknown>).MARK_DELIVERED;
      if (typeof settle !== 'string' || !settle.includes(SETTLE_FRAGMENT)) {
        note(`warning: MARK_DELIVERED no longer contains "${SETTLE_FRAGMENT}"; kills may miss`);
      }
      await insertEvents(db.sql, KILL_EVENTS);
      await db.sql.query('VACUUM ANALYZE outbox_event');
      const relay = await RelayProcess.spawn({
        url: db.url,
        mode: 'module',
        applicationName: 'bench-relay-kill',
        outbox: OUTBOX,
        progressEvery: Math.max(1, Math.floor(KILL_EVENTS / ROUNDS)),
      });
      const killer = new KillRounds(harnessClient(db.url), ROUNDS);
      await killer.connect();
      relay.onProgress(() => killer.arm());
      let runs: RelayRuns | undefined;
      let crashed: string | undefined;
      let delivered = 0;
      try {
        const started = performance.now();
        await relay.start();
        for (;;) {
          delivered = await countDelivered(db.sql);
          if (delivered >= KILL_EVENTS || relay.exit || performance.now() - started > DEADLINE_MS) {
            break;
          }
          await sleep(20);
        }
        await killer.stop();
        note(`burn-down took ${((performance.now() - started) / 1000).toFixed(1)} s`);
        if (relay.exit) crashed = `relay process exited (${JSON.stringify(relay.exit)})`;
        else runs = await relay.runs();
      } catch (error) {
        crashed = describeError(error);
      } finally {
        await killer.stop();
        await relay.close();
      }
      const output = relay.describeOutput();
      if (output) note(output);
      const { rounds, hits, statements, errors } = killer;
      note(
        `kill rounds ${rounds}, hit a settle ${hits} (${statements} kill statements` +
          `${errors ? `, ${errors} failed` : ''})`,
      );
      if (runs) {
        note(
          `handler runs ${count(runs.runs)} for ${count(runs.events)} events; ` +
            `${count(runs.rerun)} events ran more than once; ${count(delivered)} delivered`,
        );
      }
      if (crashed) note(crashed);
      return [
        {
          figure: `settle connection killed ${ROUNDS}× in a ${count(KILL_EVENTS)}-event burn-down`,
          value:
            `${killer.hits} of ${killer.rounds} kill rounds hit a settle; ` +
            `${runs ? count(runs.rerun) : 'n/a'} events rerun; ` +
            `${count(delivered)} of ${count(KILL_EVENTS)} delivered` +
            (crashed ? `; ${crashed}` : '; relay survived'),
          target: '0 reruns',
        },
      ];
    }),
};
