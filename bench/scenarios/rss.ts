import { BACKLOG_ROWS, EVENTS, RSS_SECONDS } from '../support/config';
import {
  countDelivered,
  insertEvents,
  sleep,
  withFreshDatabase,
  type BenchServer,
} from '../support/database';
import { processRssBytes } from '../support/process-stats';
import { RelayProcess } from '../support/relay-process';
import { count, mib, note, times } from '../support/report';
import type { Scenario } from './scenario';

const SMALL = Math.round(EVENTS / 2);
const SECONDS = RSS_SECONDS;
const SAMPLE_MS = 100;

interface RssRun {
  atReady: number;
  peak: number;
  peakHeap: number;
  delivered: number;
}

/**
 * The relay in a process of its own (module, no-op handler) delivering for SECONDS against a
 * backlog of `rows`: its RSS at boot and at its highest, from /proc and from the process itself.
 */
async function relayRss(server: BenchServer, rows: number): Promise<RssRun> {
  return withFreshDatabase(server, `rss_${rows}`, async (db) => {
    const took = await insertEvents(db.sql, rows);
    await db.sql.query('VACUUM ANALYZE outbox_event');
    note(`${count(rows)} rows inserted in ${(took / 1000).toFixed(1)} s`);
    const relay = await RelayProcess.spawn({
      url: db.url,
      mode: 'module',
      applicationName: 'bench-relay-rss',
    });
    try {
      const ready = await relay.stats();
      let peak = Math.max(ready.rss, processRssBytes(relay.pid) ?? 0);
      let peakHeap = ready.heapUsed;
      await relay.start();
      const end = Date.now() + SECONDS * 1000;
      while (Date.now() < end) {
        await sleep(SAMPLE_MS);
        const stats = await relay.stats();
        peak = Math.max(peak, stats.rss, processRssBytes(relay.pid) ?? 0);
        peakHeap = Math.max(peakHeap, stats.heapUsed);
      }
      const delivered = await countDelivered(db.sql);
      note(
        `backlog ${count(rows)}: RSS at boot ${mib(ready.rss)}, max ${mib(peak)}, ` +
          `max heap used ${mib(peakHeap)}, ${count(delivered)} delivered in ${SECONDS} s`,
      );
      return { atReady: ready.rss, peak, peakHeap, delivered };
    } finally {
      await relay.close();
      const output = relay.describeOutput();
      if (output) note(output);
    }
  });
}

/** Max RSS of a relay process at a BACKLOG_ROWS backlog against a SMALL one. */
export const rss: Scenario = {
  name: 'rss',
  title: `relay RSS at a ${BACKLOG_ROWS}-row backlog vs a ${SMALL}-row one (${SECONDS} s each)`,
  run: async (server) => {
    const small = await relayRss(server, SMALL);
    const large = await relayRss(server, BACKLOG_ROWS);
    return [
      {
        figure: `relay max RSS at ${count(BACKLOG_ROWS)}-row backlog vs ${count(SMALL)}`,
        value:
          `${mib(large.peak)} vs ${mib(small.peak)} = ${times(large.peak / small.peak)} ` +
          `(heap ${mib(large.peakHeap)} vs ${mib(small.peakHeap)})`,
        target: '≤ 1.2 ×',
      },
    ];
  },
};
