import type { INestApplication } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import type { Client } from 'pg';
import { DataSource } from 'typeorm';
import { OutboxPublisher, type NewOutboxEvent } from '../../libs/outbox/src';
import { sampleEvent } from './events';
import { count as formatCount, note } from './report';

/** Events per emitting transaction. */
const EMIT_BATCH = 100;

/**
 * Emits events `first` to `first + count - 1` (`sampleEvent`, ordering key `keyOf(i)`) through
 * the app's publisher, EMIT_BATCH to a transaction, in index order: the emit sequences them for
 * the app's ordered handlers (positions, `ordered_for`, wait counts, successors parked), which a
 * hand-written INSERT would not. Returns the time it took, in ms.
 */
export async function emitKeyed(
  app: INestApplication,
  count: number,
  keyOf: (i: number) => string,
  first = 0,
): Promise<number> {
  const publisher = app.get(OutboxPublisher);
  const dataSource = app.get(DataSource);
  const started = performance.now();
  for (let from = first; from < first + count; from += EMIT_BATCH) {
    const events: NewOutboxEvent[] = [];
    for (let i = from; i < Math.min(from + EMIT_BATCH, first + count); i++) {
      events.push({ ...sampleEvent(i), orderingKey: keyOf(i) });
    }
    await dataSource.transaction((manager) => publisher.emit(events, { manager }));
  }
  return performance.now() - started;
}

/** How many events wait parked behind an earlier event of their key. */
export async function countParked(sql: Client): Promise<number> {
  const { rows } = await sql.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM outbox_event WHERE next_attempt_at = '9999-12-31 00:00:00+00' AND dead_at IS NULL`,
  );
  return rows[0].n;
}

/**
 * An empty outbox (events, keys' positions, wait counts), then `emitKeyed` from 0, vacuumed and
 * analyzed: the same backlog for each app a scenario drains. Prints what it emitted.
 */
export async function loadKeyed(
  app: INestApplication,
  sql: Client,
  count: number,
  keyOf: (i: number) => string,
  label: string,
): Promise<void> {
  await sql.query('TRUNCATE outbox_event, outbox_ordering_key, outbox_ordering_wait');
  const took = await emitKeyed(app, count, keyOf);
  await sql.query('VACUUM ANALYZE outbox_event');
  note(
    `${label}: emitted ${formatCount(count)} in ${(took / 1000).toFixed(1)} s, ` +
      `${formatCount(await countParked(sql))} parked`,
  );
}
