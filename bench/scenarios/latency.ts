import { LATENCY_SECONDS, RATE_PER_SECOND } from '../support/config';
import { commitToHandlerLatency } from '../support/commit-latency';
import { withFreshDatabase } from '../support/database';
import { formatLatency } from '../support/percentiles';
import { ms, note, times } from '../support/report';
import type { Scenario } from './scenario';

/** No-op handler latency at 100 events/s, module and reference relay. */
export const latency: Scenario = {
  name: 'latency',
  title: `no-op commit→handler latency at ${RATE_PER_SECOND} events/s for ${LATENCY_SECONDS} s`,
  run: (server) =>
    withFreshDatabase(server, 'latency', async (db) => {
      const module = await commitToHandlerLatency(db.url, { module: 'noop' });
      note(`module:    ${formatLatency(module)}`);
      await db.sql.query('TRUNCATE outbox_event');
      const reference = await commitToHandlerLatency(db.url, 'reference');
      note(`reference: ${formatLatency(reference)}`);
      return [
        {
          figure: `no-op latency at ${RATE_PER_SECOND}/s p50 / p99 vs reference relay`,
          value:
            `${ms(module.p50)} / ${ms(module.p99)} vs ` +
            `${ms(reference.p50)} / ${ms(reference.p99)} = ` +
            `${times(module.p50 / reference.p50)} / ${times(module.p99 / reference.p99)}`,
          target: '≤ 1.2 × / ≤ 1.5 ×',
        },
      ];
    }),
};
