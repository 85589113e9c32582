import type { INestApplication } from '@nestjs/common';
import { performance } from 'node:perf_hooks';
import { DataSource } from 'typeorm';
import { OutboxPublisher, type OutboxModuleOptions } from '../../libs/outbox/src';
import { createOutboxApp, isUnknownOption } from '../support/app';
import { PRODUCER_SECONDS } from '../support/config';
import { withFreshDatabase, type BenchDatabase } from '../support/database';
import { bareInsert, sampleEvent } from '../support/events';
import { count, describeError, note, times, type Figure } from '../support/report';
import type { Scenario } from './scenario';

const LOOPS = 8;
/** Seconds of emits and as many of bare INSERTs per condition, in alternating 1 s blocks. */
const SECONDS = PRODUCER_SECONDS;
/** 8 producer connections and room for a relay's claim, settles and state query. */
const POOL_SIZE = LOOPS + 4;
const COALESCE_MS = 5;

interface Variant {
  label: string;
  outbox: OutboxModuleOptions;
}

const VARIANTS: Variant[] = [
  { label: 'default options', outbox: {} },
  {
    label: `tuning.wakeCoalesceMs ${COALESCE_MS}`,
    outbox: { tuning: { wakeCoalesceMs: COALESCE_MS } },
  },
];

/** LOOPS loops, one transaction each at a time, for `ms`: commits per second. */
async function commitsPerSecond(ms: number, transaction: (i: number) => Promise<unknown>) {
  const started = performance.now();
  const deadline = started + ms;
  let next = 0;
  let commits = 0;
  await Promise.all(
    Array.from({ length: LOOPS }, async () => {
      while (performance.now() < deadline) {
        await transaction(next++);
        commits++;
      }
    }),
  );
  return { commits, seconds: (performance.now() - started) / 1000 };
}

async function measure(app: INestApplication): Promise<{ emit: number; bare: number }> {
  const dataSource = app.get(DataSource);
  const publisher = app.get(OutboxPublisher);
  const emit = { commits: 0, seconds: 0 };
  const bare = { commits: 0, seconds: 0 };
  const add = (total: typeof emit, block: typeof emit) => {
    total.commits += block.commits;
    total.seconds += block.seconds;
  };
  for (let block = 0; block < SECONDS; block++) {
    add(
      emit,
      await commitsPerSecond(1000, (i) =>
        dataSource.transaction((manager) => publisher.emit(sampleEvent(i), { manager })),
      ),
    );
    add(
      bare,
      await commitsPerSecond(1000, (i) =>
        dataSource.transaction((manager) => bareInsert(manager, i)),
      ),
    );
  }
  return { emit: emit.commits / emit.seconds, bare: bare.commits / bare.seconds };
}

async function condition(
  db: BenchDatabase,
  variant: Variant,
  relayRunning: boolean,
): Promise<Figure> {
  const relay = relayRunning ? 'relay running' : 'relays stopped';
  const figure = `${LOOPS} producers, ${relay}, ${variant.label}: emit vs bare INSERT`;
  const target = relayRunning || !variant.outbox.tuning?.wakeCoalesceMs ? 'printed' : '≥ 0.9 ×';
  await db.sql.query('TRUNCATE outbox_event, outbox_bare');
  let app: INestApplication;
  try {
    app = await createOutboxApp(db.url, {
      handler: 'noop',
      autoStart: relayRunning,
      outbox: variant.outbox,
      poolSize: POOL_SIZE,
      applicationName: 'bench-producers',
    });
  } catch (error) {
    const optionMissing = Object.keys(variant.outbox).some((o) => isUnknownOption(error, o));
    const value = optionMissing ? 'n/a (option not available)' : `error: ${describeError(error)}`;
    note(`${relay}, ${variant.label}: ${value}`);
    return { figure, value, target };
  }
  try {
    const { emit, bare } = await measure(app);
    note(
      `${relay}, ${variant.label}: emit ${count(emit)}/s, bare ${count(bare)}/s, ${times(emit / bare)}`,
    );
    return {
      figure,
      value: `${count(emit)} vs ${count(bare)} commits/s = ${times(emit / bare)}`,
      target,
    };
  } finally {
    await app.close();
  }
}

/**
 * 8 concurrent producers, one emit per TypeORM transaction each, against 8 loops of the bare
 * INSERT in the same transaction shape (alternating 1 s blocks), with the relays stopped and
 * with the module's engine running in the same process, under default options and with
 * coalesced wakes.
 */
export const producers: Scenario = {
  name: 'producers',
  title: `${LOOPS} concurrent producers, emit vs bare INSERT, ${SECONDS} s each`,
  run: (server) =>
    withFreshDatabase(
      server,
      'producers',
      async (db) => {
        const figures: Figure[] = [];
        for (const variant of VARIANTS) {
          for (const relayRunning of [false, true]) {
            figures.push(await condition(db, variant, relayRunning));
          }
        }
        return figures;
      },
      { bare: true },
    ),
};
