import { performance } from 'node:perf_hooks';
import { DataSource } from 'typeorm';
import { OutboxPublisher } from '../../libs/outbox/src';
import { createOutboxApp } from '../support/app';
import { EVENTS } from '../support/config';
import { withFreshDatabase } from '../support/database';
import { bareInsert, sampleEvent } from '../support/events';
import { median } from '../support/percentiles';
import { note, times } from '../support/report';
import type { Scenario } from './scenario';

const BLOCK = 500;
/** Half of BENCH_EVENTS each way (20 blocks by default), to keep the whole run short. */
const PRODUCED = Math.max(BLOCK, Math.round(EVENTS / 2));

/**
 * One producer: ms per emit (one event per TypeORM transaction) next to a bare INSERT of the
 * same row into a table of the same shape, in the same kind of transaction. Emits and bare
 * inserts alternate in blocks of 500, so both see the same disk and cache state; a disk stall
 * lands in one block of one side, so the median block ratio is the figure.
 */
export const producer: Scenario = {
  name: 'producer',
  title: `one producer, emit vs bare INSERT (${PRODUCED} each)`,
  run: (server) =>
    withFreshDatabase(
      server,
      'producer',
      async (db) => {
        const app = await createOutboxApp(db.url, { handler: 'noop', autoStart: false });
        const dataSource = app.get(DataSource);
        const publisher = app.get(OutboxPublisher);
        let emitTime = 0;
        let bareTime = 0;
        const ratios: number[] = [];
        try {
          for (let start = 0; start < PRODUCED; start += BLOCK) {
            const end = Math.min(PRODUCED, start + BLOCK);
            let t = performance.now();
            for (let i = start; i < end; i++) {
              await dataSource.transaction((manager) =>
                publisher.emit(sampleEvent(i), { manager }),
              );
            }
            const emitBlock = performance.now() - t;
            t = performance.now();
            for (let i = start; i < end; i++) {
              await dataSource.transaction((manager) => bareInsert(manager, i));
            }
            const bareBlock = performance.now() - t;
            emitTime += emitBlock;
            bareTime += bareBlock;
            ratios.push(emitBlock / bareBlock);
          }
        } finally {
          await app.close();
        }
        const emitMs = emitTime / PRODUCED;
        const bareMs = bareTime / PRODUCED;
        const ratio = median(ratios);
        note(
          `emit ${emitMs.toFixed(3)} ms/event, bare INSERT ${bareMs.toFixed(3)} ms/event, ` +
            `ratio of means ${times(emitMs / bareMs)}, median per block of ${BLOCK} ${times(ratio)}`,
        );
        return [
          {
            figure: 'one producer: emit vs bare INSERT',
            value: `${emitMs.toFixed(3)} vs ${bareMs.toFixed(3)} ms = ${times(ratio)} (median per block)`,
            target: '≤ 1.20 ×',
          },
        ];
      },
      { bare: true },
    ),
};
