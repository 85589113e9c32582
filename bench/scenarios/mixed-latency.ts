import { LATENCY_SECONDS, RATE_PER_SECOND } from '../support/config';
import { commitToHandlerLatency } from '../support/commit-latency';
import { withFreshDatabase } from '../support/database';
import { formatLatency } from '../support/percentiles';
import { ms, note } from '../support/report';
import type { Scenario } from './scenario';

/** The same handler mix at 100 events/s, one event per transaction, engine idle. */
export const mixedLatency: Scenario = {
  name: 'mixed-latency',
  title: `mixed handlers, commit→handler start at ${RATE_PER_SECOND} events/s for ${LATENCY_SECONDS} s`,
  run: (server) =>
    withFreshDatabase(server, 'mixed_latency', async (db) => {
      const summary = await commitToHandlerLatency(db.url, { module: 'mixed' });
      note(formatLatency(summary));
      return [
        {
          figure: `mixed handlers: latency at ${RATE_PER_SECOND}/s p50 / p95 / p99 / max`,
          value: `${ms(summary.p50)} / ${ms(summary.p95)} / ${ms(summary.p99)} / ${ms(summary.max, 0)}`,
          target: 'p99 ≤ 10 ms',
        },
      ];
    }),
};
