import { performance } from 'node:perf_hooks';
import { OutboxEngine } from '../../libs/outbox/src';
import { createOutboxApp } from '../support/app';
import { EVENTS, MIXED_CAP_SECONDS } from '../support/config';
import { countDelivered, insertEvents, sleep, withFreshDatabase } from '../support/database';
import { MIXED_MEAN_MS } from '../support/events';
import { handlerHooks, resetHandlerHooks } from '../support/handlers';
import { mean } from '../support/percentiles';
import { count, ms, note, times } from '../support/report';
import type { Scenario } from './scenario';

const CONCURRENCY = 20;
/** The slot bound: CONCURRENCY handlers busy all the time, each taking the mean handler time. */
const SLOT_BOUND = CONCURRENCY / (MIXED_MEAN_MS / 1000);
/**
 * A slow engine would take minutes over the whole backlog; past this the rate is taken over
 * what was delivered so far.
 */
const CAP_SECONDS = MIXED_CAP_SECONDS;

/**
 * Handlers of 2 ms (90 %), 20 ms (9 %) and 500 ms (1 %), chosen by event index, at concurrency
 * 20, over EVENTS pre-loaded rows through the real module: events/s against the slot bound.
 */
export const mixed: Scenario = {
  name: 'mixed',
  title: `mixed handlers (2/20/500 ms), concurrency ${CONCURRENCY}, ${EVENTS} events pre-loaded`,
  run: (server) =>
    withFreshDatabase(server, 'mixed', async (db) => {
      await insertEvents(db.sql, EVENTS);
      await db.sql.query('VACUUM ANALYZE outbox_event');
      const durations: number[] = [];
      handlerHooks.onEnd = (_event, tookMs) => durations.push(tookMs);
      const app = await createOutboxApp(db.url, {
        handler: 'mixed',
        autoStart: false,
        outbox: { concurrency: CONCURRENCY },
      });
      let rate: number;
      let delivered: number;
      let capped = false;
      try {
        const started = performance.now();
        await app.get(OutboxEngine).start();
        for (;;) {
          delivered = await countDelivered(db.sql);
          const elapsed = (performance.now() - started) / 1000;
          if (delivered >= EVENTS || elapsed >= CAP_SECONDS) {
            capped = delivered < EVENTS;
            rate = delivered / elapsed;
            break;
          }
          await sleep(delivered > EVENTS * 0.95 ? 5 : 50);
        }
      } finally {
        await app.close();
        resetHandlerHooks();
      }
      const measuredMean = mean(durations);
      note(
        `${count(rate)} events/s (${count(delivered)} of ${count(EVENTS)} delivered` +
          `${capped ? `, stopped at the ${CAP_SECONDS} s cap` : ''}); slot bound ` +
          `${count(SLOT_BOUND)}/s at the nominal ${MIXED_MEAN_MS} ms mean`,
      );
      note(
        `measured handler time: mean ${ms(measuredMean)} (timer overshoot included) → bound ` +
          `${count(CONCURRENCY / (measuredMean / 1000))}/s, ratio to it ` +
          `${times(rate / (CONCURRENCY / (measuredMean / 1000)))}`,
      );
      return [
        {
          figure: 'mixed handlers: throughput vs slot bound',
          value:
            `${count(rate)} events/s = ${times(rate / SLOT_BOUND)} of ${count(SLOT_BOUND)}/s` +
            (capped ? ` (${CAP_SECONDS} s cap)` : ''),
          target: '≥ 0.9 ×',
        },
      ];
    }),
};
