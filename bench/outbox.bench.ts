/**
 * `npm run bench`: throughput and latency of the outbox on a real PostgreSQL with default
 * durability (fsync and synchronous_commit on), next to a minimal reference relay.
 *
 *   (a) producer: ms per emit (one event per TypeORM transaction) next to a bare INSERT of the
 *       same row into a table of the same shape, in the same kind of transaction;
 *       burn-down: events/s from the first claim to the last settle, through the real module
 *       to one no-op handler;
 *   (b) latency: one event per transaction at 100 events/s for 10 s, the dispatcher idle and
 *       woken by NOTIFY; commit-to-handler p50/p95/p99/max;
 *   (c) the reference relay measured the same way: one `UPDATE ... FROM (SELECT ... LIMIT 100
 *       FOR UPDATE SKIP LOCKED) RETURNING` claim, a no-op handler, one
 *       `UPDATE ... WHERE id = ANY($1)` settle per batch.
 *
 * Uses DATABASE_URL when set, else starts an embedded PostgreSQL. BENCH_EVENTS (20000) and
 * BENCH_LATENCY_SECONDS (10) scale the run; BENCH_OUTBOX_OPTIONS (JSON) overrides module
 * options, e.g. '{"concurrency":20}'.
 */
import 'reflect-metadata';
import { Injectable, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { performance } from 'node:perf_hooks';
import { Client, Pool } from 'pg';
import { DataSource } from 'typeorm';
import {
  OnOutboxEvent,
  OUTBOX_ENTITIES,
  OutboxDispatcher,
  OutboxModule,
  OutboxPublisher,
  type NewOutboxEvent,
  type OutboxModuleOptions,
  type OutboxEvent,
} from '../libs/outbox/src';
import { OUTBOX_MIGRATIONS } from '../migrations';
import { startEmbeddedPostgres } from '../test/support/embedded-postgres-server';
import { withDatabase } from '../test/support/database-url';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 20_000);
const LATENCY_SECONDS = Number(process.env.BENCH_LATENCY_SECONDS ?? 10);
const RATE_PER_SECOND = 100;
const OUTBOX_OPTIONS = JSON.parse(process.env.BENCH_OUTBOX_OPTIONS ?? '{}') as OutboxModuleOptions;
const CHANNEL = 'outbox_event';

/** Handler calls by event id, with the time they happened. */
const handled = new Map<string, number>();

@Injectable()
class NoopHandler {
  @OnOutboxEvent('noop', { events: '*' })
  handle(event: OutboxEvent) {
    handled.set(event.id, performance.now());
  }
}

function sampleEvent(i: number): NewOutboxEvent {
  return {
    type: 'invoice.paid',
    aggregateType: 'invoice',
    aggregateId: `inv-${i}`,
    organizationId: 'org-1',
    requestId: `req-${i}`,
    payload: { invoiceId: `inv-${i}`, amountCents: 12_500, currency: 'EUR' },
  };
}

async function main(): Promise<void> {
  const server = process.env.DATABASE_URL
    ? { adminUrl: process.env.DATABASE_URL, stop: () => Promise.resolve() }
    : await startEmbeddedPostgres({ durable: true });
  const url = withDatabase(server.adminUrl, `outbox_bench_${process.pid}`);
  const admin = new Client({ connectionString: server.adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE outbox_bench_${process.pid}`);
  try {
    await run(url, admin);
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS outbox_bench_${process.pid} WITH (FORCE)`);
    await admin.end();
    await server.stop();
  }
}

async function run(url: string, admin: Client): Promise<void> {
  const settings = await admin.query<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings
     WHERE name IN ('server_version', 'fsync', 'synchronous_commit', 'full_page_writes')
     ORDER BY name`,
  );
  console.log(`PostgreSQL: ${settings.rows.map((r) => `${r.name}=${r.setting}`).join(', ')}`);
  console.log(
    `Node ${process.version}, ${EVENTS} events, options ${JSON.stringify(OUTBOX_OPTIONS)}\n`,
  );

  const migrator = new DataSource({ type: 'postgres', url, migrations: OUTBOX_MIGRATIONS });
  await migrator.initialize();
  await migrator.runMigrations();
  await migrator.query(`CREATE TABLE outbox_bare (LIKE outbox_event INCLUDING ALL)`);
  await migrator.destroy();

  const sql = new Client({ connectionString: url });
  await sql.connect();
  try {
    const producer = await produce(url);
    const module = await moduleBurnDown(url, sql);
    await resetForReplay(sql);
    const reference = await referenceBurnDown(url, sql);
    await sql.query('TRUNCATE outbox_event');
    const moduleLatency = await latency(url, 'module');
    await sql.query('TRUNCATE outbox_event');
    const referenceLatency = await latency(url, 'reference');

    console.log('\n== Results ==');
    console.log(
      `(a) emit ${producer.emitMs.toFixed(3)} ms/event, bare INSERT ${producer.bareMs.toFixed(3)} ms/event, ratio of means ${(producer.emitMs / producer.bareMs).toFixed(2)}, median ratio per block of 500 ${producer.medianBlockRatio.toFixed(2)} (target <= 1.20)`,
    );
    console.log(
      `(a) burn-down: module ${module.toFixed(0)} events/s, reference ${reference.toFixed(0)} events/s, ratio ${(module / reference).toFixed(2)} (target >= 0.50)`,
    );
    console.log(
      `(b) latency, module:    ${formatLatency(moduleLatency)} (target p50 <= 2 ms, p99 <= 10 ms)`,
    );
    console.log(`(c) latency, reference: ${formatLatency(referenceLatency)}`);
    console.log(`rss ${(process.memoryUsage().rss / 1024 / 1024).toFixed(0)} MiB`);
  } finally {
    await sql.end();
  }
}

async function createApp(url: string, autoStart: boolean): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      TypeOrmModule.forRoot({
        type: 'postgres',
        url,
        entities: [...OUTBOX_ENTITIES],
        logging: false,
      }),
      OutboxModule.forRoot({ ...OUTBOX_OPTIONS, autoStart, retention: { enabled: false } }),
    ],
    providers: [NoopHandler],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: ['error', 'warn'] });
  await app.init();
  return app;
}

/** Emits and bare inserts alternate in blocks, so both see the same disk and cache state. */
async function produce(
  url: string,
): Promise<{ emitMs: number; bareMs: number; medianBlockRatio: number }> {
  const app = await createApp(url, false);
  const dataSource = app.get(DataSource);
  const publisher = app.get(OutboxPublisher);
  const block = 500;
  let emitTime = 0;
  let bareTime = 0;
  const blockRatios: number[] = [];
  try {
    for (let start = 0; start < EVENTS; start += block) {
      const end = Math.min(EVENTS, start + block);
      let t = performance.now();
      for (let i = start; i < end; i++) {
        await dataSource.transaction((manager) => publisher.emit(sampleEvent(i), { manager }));
      }
      const emitBlock = performance.now() - t;
      emitTime += emitBlock;
      t = performance.now();
      for (let i = start; i < end; i++) {
        const e = sampleEvent(i);
        await dataSource.transaction((manager) =>
          manager.query(
            `INSERT INTO outbox_bare
               (id, type, aggregate_type, aggregate_id, organization_id, request_id, payload, metadata)
             VALUES (gen_random_uuid(), $1, $2, $3, $4, $5, $6, $7)`,
            [
              e.type,
              e.aggregateType,
              e.aggregateId,
              e.organizationId,
              e.requestId,
              JSON.stringify(e.payload),
              '{}',
            ],
          ),
        );
      }
      const bareBlock = performance.now() - t;
      bareTime += bareBlock;
      blockRatios.push(emitBlock / bareBlock);
    }
  } finally {
    await app.close();
  }
  // A stall of the disk lands in one block of one side; the median block ratio is the
  // figure such stalls do not move, the means are printed next to it.
  blockRatios.sort((a, b) => a - b);
  const result = {
    emitMs: emitTime / EVENTS,
    bareMs: bareTime / EVENTS,
    medianBlockRatio: blockRatios[Math.floor(blockRatios.length / 2)],
  };
  console.log(
    `producer: emit ${result.emitMs.toFixed(3)} ms, bare INSERT ${result.bareMs.toFixed(3)} ms`,
  );
  return result;
}

async function waitUntilSettled(sql: Client): Promise<void> {
  for (;;) {
    const { rows } = await sql.query<{ live: boolean }>(
      'SELECT EXISTS (SELECT 1 FROM outbox_event WHERE dispatched_at IS NULL) AS live',
    );
    if (!rows[0].live) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

async function moduleBurnDown(url: string, sql: Client): Promise<number> {
  await sql.query('VACUUM ANALYZE outbox_event');
  handled.clear();
  const app = await createApp(url, false);
  try {
    const started = performance.now();
    await app.get(OutboxDispatcher).start();
    await waitUntilSettled(sql);
    const rate = EVENTS / ((performance.now() - started) / 1000);
    if (handled.size !== EVENTS) throw new Error(`handled ${handled.size} of ${EVENTS}`);
    console.log(`module burn-down: ${rate.toFixed(0)} events/s`);
    return rate;
  } finally {
    await app.close();
  }
}

/** The same rows, undelivered again and physically rewritten, for the reference to drain. */
async function resetForReplay(sql: Client): Promise<void> {
  await sql.query(
    `UPDATE outbox_event SET dispatched_at = NULL, deliveries = '{}', attempts = 0, lease_expires_at = NULL`,
  );
  await sql.query('VACUUM FULL outbox_event');
  await sql.query('ANALYZE outbox_event');
}

const REFERENCE_CLAIM = `
  UPDATE outbox_event AS e
  SET attempts = e.attempts + 1, lease_expires_at = now() + interval '60 seconds'
  FROM (
    SELECT id FROM outbox_event
    WHERE dispatched_at IS NULL AND dead_at IS NULL AND next_attempt_at <= now()
      AND (lease_expires_at IS NULL OR lease_expires_at <= now())
    ORDER BY occurred_at, id
    LIMIT 100
    FOR UPDATE SKIP LOCKED
  ) AS due
  WHERE e.id = due.id
  RETURNING e.id, e.type, e.payload`;
const REFERENCE_SETTLE = `UPDATE outbox_event SET dispatched_at = now(), lease_expires_at = NULL WHERE id = ANY($1::uuid[])`;

/** The reference relay: claim, no-op handler, settle, until a claim comes back empty. */
async function referenceDrain(pool: Pool, onEvent: (id: string) => void): Promise<number> {
  let total = 0;
  for (;;) {
    const { rows } = await pool.query<{ id: string }>(REFERENCE_CLAIM);
    if (rows.length === 0) return total;
    for (const row of rows) onEvent(row.id);
    await pool.query(REFERENCE_SETTLE, [rows.map((r) => r.id)]);
    total += rows.length;
  }
}

async function referenceBurnDown(url: string, sql: Client): Promise<number> {
  const pool = new Pool({ connectionString: url, max: 2 });
  try {
    const started = performance.now();
    const drained = await referenceDrain(pool, () => undefined);
    await waitUntilSettled(sql);
    const rate = drained / ((performance.now() - started) / 1000);
    console.log(`reference burn-down: ${rate.toFixed(0)} events/s`);
    return rate;
  } finally {
    await pool.end();
  }
}

/** One event per transaction at a steady rate; commit-to-handler delay of each. */
async function latency(url: string, relay: 'module' | 'reference'): Promise<number[]> {
  handled.clear();
  const producerApp = await createApp(url, false);
  const consumerApp = relay === 'module' ? await createApp(url, true) : undefined;
  const stopReference = relay === 'reference' ? await startReferenceListener(url) : undefined;
  const committed = new Map<string, number>();
  try {
    const dataSource = producerApp.get(DataSource);
    const publisher = producerApp.get(OutboxPublisher);
    const total = RATE_PER_SECOND * LATENCY_SECONDS;
    const started = performance.now();
    for (let i = 0; i < total; i++) {
      const due = started + (i * 1000) / RATE_PER_SECOND;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const id = await dataSource.transaction((manager) =>
        publisher.emit(sampleEvent(i), { manager }),
      );
      committed.set(id, performance.now());
    }
    const deadline = performance.now() + 30_000;
    while (handled.size < total && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    if (handled.size < total) throw new Error(`${relay}: handled ${handled.size} of ${total}`);
    // The NOTIFY can reach the relay before the producer has read its COMMIT reply; such
    // events count as zero delay.
    return [...committed]
      .map(([id, at]) => Math.max(0, handled.get(id)! - at))
      .sort((a, b) => a - b);
  } finally {
    await stopReference?.();
    await consumerApp?.close();
    await producerApp.close();
  }
}

/** The reference relay woken by NOTIFY: drain until empty on every notification. */
async function startReferenceListener(url: string): Promise<() => Promise<void>> {
  const pool = new Pool({ connectionString: url, max: 2 });
  const listener = new Client({ connectionString: url });
  await listener.connect();
  let draining: Promise<void> | undefined;
  let again = false;
  const drain = (): void => {
    if (draining) {
      again = true;
      return;
    }
    draining = referenceDrain(pool, (id) => handled.set(id, performance.now()))
      .then(() => undefined)
      .finally(() => {
        draining = undefined;
        if (again) {
          again = false;
          drain();
        }
      });
  };
  listener.on('notification', drain);
  await listener.query(`LISTEN ${CHANNEL}`);
  return async () => {
    await listener.end();
    await draining;
    await pool.end();
  };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

function formatLatency(sorted: number[]): string {
  return ['p50', 'p95', 'p99']
    .map((label) => `${label} ${percentile(sorted, Number(label.slice(1))).toFixed(2)} ms`)
    .concat(`max ${sorted[sorted.length - 1].toFixed(2)} ms (n=${sorted.length})`)
    .join(', ');
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
