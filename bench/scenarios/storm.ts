import type { INestApplication } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { DataSource, type EntityManager } from 'typeorm';
import { OutboxPublisher } from '../../libs/outbox/src';
import { createOutboxApp } from '../support/app';
import { STORM_SECONDS } from '../support/config';
import { withFreshDatabase, type BenchDatabase } from '../support/database';
import { BackendCpuSampler } from '../support/process-stats';
import { sampleEvent } from '../support/events';
import { handlerHooks, resetHandlerHooks } from '../support/handlers';
import { summarizeLatency, type LatencySummary } from '../support/percentiles';
import { REFERENCE_CHANNEL, startReferenceListener } from '../support/reference-relay';
import { count, ms, note, times, type Figure } from '../support/report';
import type { Scenario } from './scenario';

/**
 * The user's write path on the busiest day: 8 producer connections, one event per transaction,
 * for STORM_SECONDS, with each consumer on the same database taking what its work costs the
 * producers. Beside them, the same loops writing the same row bare, and with a `pg_notify`, and
 * the reference relay's own storm (INSERT + `pg_notify`, drained on every notification).
 *
 * Write transactions are counted by the server's transaction ids (`txid_current()` before and
 * after): each producer commit takes one, as does each claim and settle of a consumer, so per
 * event they say how many database commits an event costs the database, the producer's own
 * included.
 */

const LOOPS = 8;
/** 8 producer connections and room for the engine's claim, settles and probes. */
const POOL_SIZE = LOOPS + 4;
/** How long a storm's last events may take to reach a handler before the figures are taken. */
const CATCH_UP_MS = 30_000;

interface Storm {
  commits: number;
  seconds: number;
  /** Write transactions the server counted per committed event. */
  xactsPerEvent: number;
  /** Commit → first line of the handler, when a consumer ran. */
  latency?: LatencySummary;
  /** CPU per committed event: this process (producers and consumer), and the database's backends. */
  cpuPerEvent: { processUs: number; serverUs: number | null };
}

/** The scenario's database, and whether its backends' CPU can be read here. */
type StormDatabase = BenchDatabase & { local: boolean };

type Producer = (manager: EntityManager, i: number) => Promise<string>;

/** A bare row into `outbox_bare`, optionally with the NOTIFY the outbox's emit sends. */
function bareRow(table: 'outbox_bare' | 'outbox_event', notify: boolean): Producer {
  return async (manager, i) => {
    const e = sampleEvent(i);
    const id = randomUUID();
    await manager.query(
      `INSERT INTO ${table}
         (id, type, aggregate_type, aggregate_id, organization_id, request_id, payload)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [id, e.type, e.aggregateType, e.aggregateId, e.organizationId, e.requestId, e.payload],
    );
    if (notify) await manager.query(`SELECT pg_notify($1, '')`, [REFERENCE_CHANNEL]);
    return id;
  };
}

async function serverXid(db: BenchDatabase): Promise<number> {
  const { rows } = await db.sql.query<{ xid: string }>('SELECT txid_current() AS xid');
  return Number(rows[0].xid);
}

/**
 * LOOPS loops of one transaction each for STORM_SECONDS through `app`'s DataSource; then waits
 * for a consumer (when `started` is given) to reach every event.
 */
async function storm(
  db: StormDatabase,
  app: INestApplication,
  produce: Producer,
  started?: Map<string, number>,
): Promise<Storm> {
  const dataSource = app.get(DataSource);
  const committed = new Map<string, number>();
  const backends = new BackendCpuSampler(db.sql, db.local);
  await backends.start();
  const cpuBefore = process.cpuUsage();
  const xidBefore = await serverXid(db);
  const begin = performance.now();
  const deadline = begin + STORM_SECONDS * 1000;
  let next = 0;
  await Promise.all(
    Array.from({ length: LOOPS }, async () => {
      while (performance.now() < deadline) {
        const id = await dataSource.transaction((manager) => produce(manager, next++));
        committed.set(id, performance.now());
      }
    }),
  );
  const seconds = (performance.now() - begin) / 1000;
  let latency: LatencySummary | undefined;
  if (started) {
    const caughtUp = performance.now() + CATCH_UP_MS;
    while (started.size < committed.size && performance.now() < caughtUp) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    if (started.size < committed.size) {
      note(`only ${count(started.size)} of ${count(committed.size)} events reached a handler`);
    }
    latency = summarizeLatency(
      [...committed]
        .filter(([id]) => started.has(id))
        .map(([id, at]) => Math.max(0, started.get(id)! - at)),
    );
  }
  // The consumer's last settles are counted too: they are part of what the storm cost.
  const xacts = (await serverXid(db)) - xidBefore - 1;
  const cpu = process.cpuUsage(cpuBefore);
  const server = await backends.stop();
  const events = committed.size;
  return {
    commits: events,
    seconds,
    xactsPerEvent: xacts / events,
    latency,
    cpuPerEvent: {
      processUs: (cpu.user + cpu.system) / events,
      serverUs: server.unavailable ? null : (server.seconds * 1e6) / events,
    },
  };
}

const rate = (s: Storm) => s.commits / s.seconds;

function describe(s: Storm): string {
  const latency = s.latency
    ? `, commit → handler p50 ${ms(s.latency.p50)} / p99 ${ms(s.latency.p99)}`
    : '';
  const { processUs, serverUs } = s.cpuPerEvent;
  const cpu = `CPU per event ${processUs.toFixed(0)} µs here${serverUs === null ? '' : ` + ${serverUs.toFixed(0)} µs server`}`;
  return `${count(rate(s))} commits/s, ${s.xactsPerEvent.toFixed(2)} write transactions per event, ${cpu}${latency}`;
}

/** The outbox's emit, with the engine running (handlers timed) or stopped. */
async function moduleStorm(db: StormDatabase, consumerRunning: boolean): Promise<Storm> {
  const started = new Map<string, number>();
  handlerHooks.onStart = (event, at) => {
    if (!started.has(event.id)) started.set(event.id, at);
  };
  const app = await createOutboxApp(db.url, {
    handler: 'noop',
    autoStart: consumerRunning,
    poolSize: POOL_SIZE,
    applicationName: 'bench-storm',
  });
  try {
    const publisher = app.get(OutboxPublisher);
    return await storm(
      db,
      app,
      (manager, i) => publisher.emit(sampleEvent(i), { manager }),
      consumerRunning ? started : undefined,
    );
  } finally {
    resetHandlerHooks();
    await app.close();
  }
}

/** Bare rows through an engine-less app's DataSource, or the reference relay's storm. */
async function bareStorm(db: StormDatabase, produce: Producer, reference: boolean): Promise<Storm> {
  const app = await createOutboxApp(db.url, {
    handler: 'noop',
    autoStart: false,
    poolSize: POOL_SIZE,
    applicationName: 'bench-storm',
  });
  const started = new Map<string, number>();
  const stopReference = reference
    ? await startReferenceListener(db.url, (id) => {
        if (!started.has(id)) started.set(id, performance.now());
      })
    : undefined;
  try {
    return await storm(db, app, produce, reference ? started : undefined);
  } finally {
    await stopReference?.();
    await app.close();
  }
}

export const stormScenario: Scenario = {
  name: 'storm',
  title: `producer storm: ${LOOPS} producers, one event per transaction, ${STORM_SECONDS} s each`,
  run: (server) =>
    withFreshDatabase(
      server,
      'storm',
      async (database) => {
        const db = { ...database, local: server.local };
        const runs: Array<[string, () => Promise<Storm>]> = [
          ['bare INSERT', () => bareStorm(db, bareRow('outbox_bare', false), false)],
          ['INSERT + pg_notify', () => bareStorm(db, bareRow('outbox_bare', true), false)],
          ['reference relay', () => bareStorm(db, bareRow('outbox_event', true), true)],
          ['module, consumer stopped', () => moduleStorm(db, false)],
          ['module, consumer running', () => moduleStorm(db, true)],
        ];
        const results = new Map<string, Storm>();
        const only = process.env.BENCH_STORM_RUNS?.split(',');
        for (const [label, run] of runs) {
          if (only && !only.some((o) => label.includes(o))) continue;
          await db.sql.query('TRUNCATE outbox_event, outbox_bare');
          const result = await run();
          results.set(label, result);
          note(`${label}: ${describe(result)}`);
        }
        if (only) return [];
        const insert = results.get('bare INSERT')!;
        const notified = results.get('INSERT + pg_notify')!;
        const reference = results.get('reference relay')!;
        const stopped = results.get('module, consumer stopped')!;
        const running = results.get('module, consumer running')!;
        const versus = (a: Storm, b: Storm) =>
          `${count(rate(a))} vs ${count(rate(b))} commits/s = ${times(rate(a) / rate(b))}`;
        const figures: Figure[] = [
          {
            figure: 'storm, consumer running: commits/s vs the reference relay storm',
            value: versus(running, reference),
            target: '≥ 1.0 ×',
          },
          {
            figure: 'storm, consumer running: commit → handler p50 / p99 (reference)',
            value: `${ms(running.latency!.p50)} / ${ms(running.latency!.p99)} (${ms(reference.latency!.p50)} / ${ms(reference.latency!.p99)})`,
            target: 'p99 ≤ 15 ms',
          },
          {
            figure: 'storm: write transactions per event, module / reference relay',
            value: `${running.xactsPerEvent.toFixed(2)} / ${reference.xactsPerEvent.toFixed(2)}`,
            target: 'printed',
          },
          {
            figure: 'storm, consumer stopped: commits/s vs INSERT + pg_notify',
            value: versus(stopped, notified),
            target: '≥ 0.9 ×',
          },
          {
            figure: 'storm: INSERT + pg_notify vs bare INSERT',
            value: versus(notified, insert),
            target: 'printed',
          },
        ];
        return figures;
      },
      { bare: true },
    ),
};
