import { performance } from 'node:perf_hooks';
import type { Client } from 'pg';
import { OutboxEngine } from '../../libs/outbox/src';
import { createOutboxApp } from '../support/app';
import { EVENTS } from '../support/config';
import {
  countDelivered,
  insertEvents,
  waitUntilSettled,
  walBytesSince,
  walPosition,
  withFreshDatabase,
} from '../support/database';
import { count, note, times } from '../support/report';
import { handlerRuns, ranAll } from '../support/handlers';
import { graphileWorkerBurnDown, graphileWorkerRuns } from '../support/graphile-worker';
import { referenceBurnDown } from '../support/reference-relay';
import type { Scenario } from './scenario';

const TIMEOUT_MS = 120_000;

/** WAL bytes per event of a run over EVENTS events, whole. */
function walPerEvent(bytes: number): string {
  return count(bytes / EVENTS);
}

/** The same EVENTS rows, freshly written and vacuumed, for each relay to drain. */
async function loadBacklog(sql: Client): Promise<void> {
  await sql.query('TRUNCATE outbox_event');
  await insertEvents(sql, EVENTS);
  await sql.query('VACUUM ANALYZE outbox_event');
}

/**
 * No-op burn-down: events/s from the first claim to the last settle through the real module
 * (OutboxModule, one no-op handler), next to the reference relay on the same rows and to
 * graphile-worker's local queue on as many jobs (on Node 22.18 or later).
 */
export const burndown: Scenario = {
  name: 'burndown',
  title: `no-op burn-down of ${EVENTS} events, module vs reference relay`,
  run: (server) =>
    withFreshDatabase(server, 'burndown', async (db) => {
      await loadBacklog(db.sql);
      const app = await createOutboxApp(db.url, { handler: 'noop', autoStart: false });
      let module: number;
      let delivered: number;
      let moduleWal: number;
      try {
        const wal = await walPosition(db.sql);
        handlerRuns.count = 0;
        const started = performance.now();
        await app.get(OutboxEngine).start();
        const settled = await waitUntilSettled(db.sql, TIMEOUT_MS, 5, ranAll(EVENTS));
        const seconds = (performance.now() - started) / 1000;
        delivered = settled ? EVENTS : await countDelivered(db.sql);
        module = delivered / seconds;
        moduleWal = await walBytesSince(db.sql, wal);
      } finally {
        await app.close();
      }
      note(
        `module: ${count(module)} events/s (${count(delivered)} delivered` +
          `${delivered < EVENTS ? `, not all within ${TIMEOUT_MS / 1000} s` : ''}), ` +
          `${walPerEvent(moduleWal)} WAL bytes per event`,
      );

      await loadBacklog(db.sql);
      const referenceWal = await walPosition(db.sql);
      const reference = await referenceBurnDown(db.url);
      const referenceBytes = await walBytesSince(db.sql, referenceWal);
      note(
        `reference: ${count(reference.rate)} events/s (${count(reference.events)} delivered), ` +
          `${walPerEvent(referenceBytes)} WAL bytes per event`,
      );
      const figures = [
        {
          figure: 'no-op burn-down vs reference relay',
          value: `${count(module)} vs ${count(reference.rate)} events/s = ${times(module / reference.rate)}`,
          target: '≥ 1.5 ×',
        },
      ];
      if (!graphileWorkerRuns()) {
        note(`graphile-worker: not run (it needs Node 22.18 or later; this is ${process.version})`);
        return figures;
      }
      await db.sql.query('TRUNCATE outbox_event');
      const graphile = await graphileWorkerBurnDown(db.url, db.sql, EVENTS);
      note(
        `graphile-worker: ${count(graphile.rate)} events/s (local queue, batched completion), ` +
          `${walPerEvent(graphile.walBytes)} WAL bytes per event`,
      );
      return [
        ...figures,
        {
          figure: 'WAL bytes per event: module / reference / graphile-worker',
          value: [moduleWal, referenceBytes, graphile.walBytes].map(walPerEvent).join(' / '),
          target: 'report',
        },
        {
          figure: 'no-op burn-down vs graphile-worker',
          value: `${count(module)} vs ${count(graphile.rate)} events/s = ${times(module / graphile.rate)}`,
          target: '≥ 1.05 ×',
        },
      ];
    }),
};
