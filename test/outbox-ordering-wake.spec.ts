import { Injectable, type INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OnOutboxEvent, OutboxPublisher, type NewOutboxEvent, type OutboxEvent } from '@app/outbox';
import { createOutboxApp } from './support/outbox-app';
import { useTestDatabase } from './support/test-database';

/**
 * A settle that frees a key makes the next event of the key due and wakes the dispatchers, as an
 * emit does: with the poll an hour away, a key's queue still runs one event after another.
 */

const seen: number[] = [];

@Injectable()
class Handlers {
  @OnOutboxEvent('ledger', { events: ['account.credited'], ordered: true })
  ledger(event: OutboxEvent<{ n: number }>) {
    seen.push(event.payload.n);
  }
}

const t = useTestDatabase();
let app: INestApplication;

beforeAll(async () => {
  app = await createOutboxApp({
    url: t.db.url,
    outbox: { pollIntervalMs: 3_600_000, retention: { enabled: false } },
    providers: [Handlers],
  });
});

afterAll(async () => {
  await app?.close();
});

it("runs a key's queue to its end without waiting for a poll", async () => {
  const events: NewOutboxEvent[] = Array.from({ length: 20 }, (_, n) => ({
    type: 'account.credited',
    aggregateType: 'account',
    aggregateId: '42',
    payload: { n },
  }));
  await app
    .get(DataSource)
    .transaction((manager) => app.get(OutboxPublisher).emit(events, { manager }));
  const deadline = Date.now() + 15_000;
  while (seen.length < events.length && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  expect(seen).toEqual(events.map((_, n) => n));
});
