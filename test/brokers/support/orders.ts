import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OutboxPublisher, type NewOutboxEvent } from '@app/outbox';

/** An event of aggregate `order` `key`; `n` tells its place among the key's events. */
export function orderEvent(type: string, key: number, n: number): NewOutboxEvent {
  return {
    type,
    aggregateType: 'order',
    aggregateId: String(key),
    causationId: null,
    correlationId: `corr-${key}`,
    payload: { key, n },
  };
}

/** Emits `events` in one transaction of `app`'s, committed when this resolves; their ids. */
export function emitTogether(app: INestApplication, events: NewOutboxEvent[]): Promise<string[]> {
  const publisher = app.get(OutboxPublisher);
  return app.get(DataSource).transaction((manager) => publisher.emit(events, { manager }));
}

/**
 * `producers` concurrent producers, each committing `txs` transactions of `perTx` events over
 * 17 keys of its own, `n` growing within each key; the ids in the order they were emitted.
 */
export async function emitConcurrently(
  app: INestApplication,
  type: string,
  { producers, txs, perTx }: { producers: number; txs: number; perTx: number },
): Promise<string[]> {
  const emitted: string[] = [];
  await Promise.all(
    Array.from({ length: producers }, async (_, producer) => {
      for (let tx = 0; tx < txs; tx++) {
        const events = Array.from({ length: perTx }, (_, i) =>
          orderEvent(type, producer * 1000 + (i % 17), tx * 100 + i),
        );
        emitted.push(...(await emitTogether(app, events)));
      }
    }),
  );
  return emitted;
}
