/**
 * `npm run bench`: the outbox on a real PostgreSQL with default durability (fsync and
 * synchronous_commit on), each figure next to a baseline measured in the same run, since the
 * machine is shared and noisy. Every scenario (bench/scenarios/) gets a fresh database; the
 * run ends with a Markdown summary table (figure, value, target). Nothing is asserted.
 *
 *   producer       one producer: emit vs a bare INSERT of the same row
 *   burndown       no-op burn-down: module vs a minimal reference relay
 *   latency        no-op commit→handler latency at 100 events/s, module and reference
 *   held-xmin      burn-down and latency while a transaction holds the xmin horizon, vs
 *                  without; buffers one claim reads per row it returns
 *   mixed          handlers of 2/20/500 ms at concurrency 20: events/s vs the slot bound
 *   mixed-latency  the same handlers, commit→handler start at 100 events/s
 *   claim-backoff  the claim with 200,000 rows in backoff and 100 due: rows read, time
 *   health         pendingState at 1,000,000 undelivered rows vs 100
 *   rss            relay process RSS at a 1,000,000-row backlog vs a 10,000-row one
 *   cpu            CPU per 10,000 no-op events, relay process + its backends, vs reference
 *   producers      8 concurrent producers: emit vs bare INSERT, relays stopped and running,
 *                  default options and tuning.wakeCoalesceMs 5
 *   settle-kill    the settle connection terminated 100 times during a burn-down
 *   telemetry      emit and burn-down with an OpenTelemetry SDK registered vs the API alone
 *   ordered-burndown  no-op burn-down over 1,000 keys: the handler ordered vs unordered
 *   ordered-one-key   one key, an ordered handler of 2 ms: events/s vs 500/s
 *   blocked-claim  the live claim with 10,000 events behind 100 keys blocked by dead heads, vs
 *                  none: median and p95 time, rows and buffers read
 *   relay          the no-op backlog relayed to NATS JetStream and to RabbitMQ (delivered on
 *                  the broker's confirm) vs the no-op burn-down; each relay ordered over 1,000
 *                  keys vs unordered
 *   inbox          messages waiting in each broker received into the outbox: messages/s
 *
 * BENCH_ONLY=name1,name2 runs a subset (`scrub` selects bench/scrub-error.bench.ts); the other
 * knobs are in bench/support/config.ts. Uses DATABASE_URL when set, else an embedded PostgreSQL.
 */
import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { SCENARIOS, SCRUB } from './scenarios';
import { EVENTS, LATENCY_SECONDS, OUTBOX_OPTIONS, selectedNames } from './support/config';
import { serverSettings, startServer } from './support/database';
import { resetHandlerHooks } from './support/handlers';
import { describeError, markdownTable, type Figure } from './support/report';

async function main(): Promise<void> {
  const selected = selectedNames();
  const known = new Set([SCRUB, ...SCENARIOS.map((s) => s.name)]);
  const unknown = [...(selected ?? [])].filter((name) => !known.has(name));
  if (unknown.length > 0) {
    console.error(`BENCH_ONLY: unknown ${unknown.join(', ')}; known: ${[...known].join(', ')}`);
    process.exit(1);
  }
  const scenarios = SCENARIOS.filter((s) => !selected || selected.has(s.name));
  if (scenarios.length === 0) return;

  const server = await startServer();
  const figures: Figure[] = [];
  const runStarted = performance.now();
  try {
    console.log(`PostgreSQL: ${await serverSettings(server.adminUrl)}`);
    console.log(
      `Node ${process.version}, BENCH_EVENTS=${EVENTS}, BENCH_LATENCY_SECONDS=${LATENCY_SECONDS}, ` +
        `options ${JSON.stringify(OUTBOX_OPTIONS)}`,
    );
    for (const scenario of scenarios) {
      console.log(`\n== ${scenario.name}: ${scenario.title} ==`);
      const started = performance.now();
      try {
        figures.push(...(await scenario.run(server)));
      } catch (error) {
        console.log(
          `  failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
        );
        figures.push({
          figure: scenario.title,
          value: `error: ${describeError(error)}`,
          target: '',
        });
      } finally {
        resetHandlerHooks();
      }
      console.log(`  (${((performance.now() - started) / 1000).toFixed(1)} s)`);
    }
  } finally {
    await server.stop();
  }
  console.log(`\n== Summary (${((performance.now() - runStarted) / 1000).toFixed(0)} s) ==\n`);
  console.log(markdownTable(figures));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
