import { EVENTS } from '../support/config';
import {
  countDelivered,
  harnessClient,
  insertEvents,
  waitUntilSettled,
  withFreshDatabase,
  type BenchDatabase,
  type BenchServer,
} from '../support/database';
import { BackendCpuSampler, processCpuSeconds, type BackendCpu } from '../support/process-stats';
import { RelayProcess } from '../support/relay-process';
import { count, note, times } from '../support/report';
import type { Scenario } from './scenario';

const CPU_EVENTS = Math.round(EVENTS / 2);
const PER = 10_000;

const TIMEOUT_MS = 120_000;

interface CpuRun {
  /** Events delivered: CPU_EVENTS, unless the burn-down did not finish in time. */
  events: number;
  relaySeconds: number;
  backends: BackendCpu;
  wallSeconds: number;
}

async function processCpu(relay: RelayProcess): Promise<number> {
  return processCpuSeconds(relay.pid) ?? (await relay.stats()).cpuSeconds;
}

/**
 * A burn-down of CPU_EVENTS no-op events by a relay process of its own: CPU seconds of that
 * process (/proc/<pid>/stat) and of the backends serving it, from just before `start` to the
 * moment no live row is left.
 */
async function burnDownCpu(
  server: BenchServer,
  db: BenchDatabase,
  mode: 'module' | 'reference',
): Promise<CpuRun> {
  await db.sql.query('TRUNCATE outbox_event');
  await insertEvents(db.sql, CPU_EVENTS);
  await db.sql.query('VACUUM ANALYZE outbox_event');
  const relay = await RelayProcess.spawn({
    url: db.url,
    mode,
    applicationName: `bench-relay-${mode}`,
  });
  const monitor = harnessClient(db.url);
  await monitor.connect();
  try {
    const sampler = new BackendCpuSampler(monitor, server.local);
    await sampler.start();
    const before = await processCpu(relay);
    const started = Date.now();
    await relay.start();
    const settled = await waitUntilSettled(db.sql, TIMEOUT_MS);
    const relaySeconds = (await processCpu(relay)) - before;
    const wallSeconds = (Date.now() - started) / 1000;
    const backends = await sampler.stop();
    const events = settled ? CPU_EVENTS : await countDelivered(db.sql);
    if (!settled) note(`${mode}: only ${count(events)} delivered within ${TIMEOUT_MS / 1000} s`);
    return { events, relaySeconds, backends, wallSeconds };
  } finally {
    await monitor.end();
    await relay.close();
    const output = relay.describeOutput();
    if (output) note(`${mode}: ${output}`);
  }
}

/** CPU seconds per PER events. */
function per(run: CpuRun, seconds: number): number {
  return (seconds * PER) / run.events;
}

function describe(run: CpuRun): string {
  const b = run.backends;
  const backend = b.unavailable ? 'n/a' : per(run, b.seconds).toFixed(2);
  return (
    `process ${per(run, run.relaySeconds).toFixed(2)} s + backends ${backend} s per ` +
    `${count(PER)} (wall ${run.wallSeconds.toFixed(1)} s for ${count(run.events)}; ` +
    `${b.backends} backends [${b.applications.join(', ')}], ${b.vanished} exited mid-run)`
  );
}

/** CPU per 10,000 no-op events, relay process plus its backends, module vs reference relay. */
export const cpu: Scenario = {
  name: 'cpu',
  title: `CPU per ${PER} no-op events (burn-down of ${CPU_EVENTS}), relay + backends, module vs reference`,
  run: (server) =>
    withFreshDatabase(server, 'cpu', async (db) => {
      const module = await burnDownCpu(server, db, 'module');
      note(`module:    ${describe(module)}`);
      const reference = await burnDownCpu(server, db, 'reference');
      note(`reference: ${describe(reference)}`);
      const unavailable = module.backends.unavailable ?? reference.backends.unavailable;
      if (unavailable) {
        note(`backend CPU cannot be attributed: ${unavailable}; process CPU only`);
        return [
          {
            figure: `CPU per ${count(PER)} no-op events vs reference (process only)`,
            value:
              `${per(module, module.relaySeconds).toFixed(2)} vs ` +
              `${per(reference, reference.relaySeconds).toFixed(2)} s = ` +
              `${times(per(module, module.relaySeconds) / per(reference, reference.relaySeconds))} ` +
              `(backends n/a: ${unavailable})`,
            target: '≤ 1.5 ×',
          },
        ];
      }
      const total = (run: CpuRun) => per(run, run.relaySeconds + run.backends.seconds);
      const ratio = (of: (run: CpuRun) => number) => times(of(module) / of(reference));
      const incomplete =
        module.backends.vanished + reference.backends.vanished > 0
          ? ' (some backends exited mid-run: their last interval is missing)'
          : '';
      return [
        {
          figure: `CPU per ${count(PER)} no-op events, relay + backends, vs reference`,
          value:
            `${total(module).toFixed(2)} vs ${total(reference).toFixed(2)} s = ${ratio(total)} ` +
            `(process ${ratio((run) => per(run, run.relaySeconds))}, ` +
            `backends ${ratio((run) => per(run, run.backends.seconds))})${incomplete}`,
          target: '≤ 1.5 ×',
        },
      ];
    }),
};
