import type { INestApplication } from '@nestjs/common';
import {
  OutboxBridgeHealthIndicator,
  RELAY_HEADERS,
  type OutboxRelayTransport,
} from '@app/outbox/bridge';
import { useTestDatabase } from '../../support/test-database';
import type { BrokerDriver, BrokerUnderTest } from '../support/broker-driver';
import { expectKeyOrder, expectSameIds } from '../support/message-checks';
import { emitConcurrently, emitTogether, orderEvent } from '../support/orders';
import { waitForRows } from '../support/wait';
import { createRelayApp } from '../support/bridge-outbox';

/**
 * A relay against a real broker: delivered means the broker took it, each event reaches the
 * orders destination once with its headers, each key's events in commit order; an event the
 * broker has nowhere to put fails its delivery with the broker's reason.
 */
export function relayConformance(driver: BrokerDriver): void {
  const t = useTestDatabase();
  let broker: BrokerUnderTest;
  let app: INestApplication;

  beforeAll(async () => {
    broker = await driver.start();
    app = await createRelayApp(
      t.db.url,
      {
        name: driver.relayName,
        events: ['order.placed', 'invoice.lost'],
        ordered: true,
        transport: failingFirstTries(broker.relayTransport()),
      },
      { retry: { baseMs: 10, maxMs: 50, jitter: 0 }, maxAttempts: 3 },
    );
  }, 90_000);

  afterAll(async () => {
    await app?.close();
    await broker?.remove();
  });

  it('relays 10,000 events to the broker once each, with their headers, each key in commit order', async () => {
    const emitted = await emitConcurrently(app, 'order.placed', {
      producers: 3,
      txs: 100,
      perTx: 33,
    });
    const rest = Array.from({ length: 10_000 - emitted.length }, (_, i) =>
      orderEvent('order.placed', 9000 + (i % 5), 100_000 + i),
    );
    emitted.push(...(await emitTogether(app, rest)));
    expect(emitted).toHaveLength(10_000);
    await waitForRows(
      t.sql,
      `SELECT count(*)::int AS n FROM outbox_event WHERE type = 'order.placed' AND dispatched_at IS NULL`,
      0,
      120_000,
    );

    const messages = await broker.takeOrders();
    expect(messages).toHaveLength(10_000);
    expectSameIds(
      messages.map((m) => m.id),
      emitted,
    );
    const rows = await t.sql.query<{ id: string; ordering_key: string; occurred_at: Date }>(
      `SELECT id, ordering_key, occurred_at FROM outbox_event WHERE type = 'order.placed'`,
    );
    const byId = new Map(rows.rows.map((r) => [r.id, r]));
    for (const m of messages) {
      const row = byId.get(m.id!)!;
      expect(m.destination).toBe(broker.destinationOf('order.placed'));
      expect(row.ordering_key).toBe(`order:${m.payload.key}`);
      expect(m.headers).toEqual({
        [RELAY_HEADERS.id]: m.id,
        [RELAY_HEADERS.type]: 'order.placed',
        [RELAY_HEADERS.aggregateType]: 'order',
        [RELAY_HEADERS.aggregateId]: String(m.payload.key),
        [RELAY_HEADERS.orderingKey]: row.ordering_key,
        [RELAY_HEADERS.correlationId]: `corr-${m.payload.key}`,
        [RELAY_HEADERS.occurredAt]: row.occurred_at.toISOString(),
      });
      // The payload as JSON (as the outbox stored it: jsonb orders keys its own way).
      expect(JSON.parse(m.body)).toEqual({ key: m.payload.key, n: m.payload.n });
      expect(m.body).toBe(JSON.stringify(JSON.parse(m.body)));
      broker.expectOwnProperties?.(m, { type: 'order.placed', occurredAt: row.occurred_at });
    }
    // Per key, the broker holds the events in the order their transactions committed; within a
    // producer's key, that is the order of `n`. Some first tries failed (failingFirstTries), so
    // only a relay that keeps each key's order holds this.
    expectKeyOrder(messages);
  }, 180_000);

  const republished = driver.dropsRepublishes
    ? 'the broker drops the copy (duplicate window)'
    : 'the broker holds a second copy under the same message id';
  it(`publishes again an event whose settle was lost after the ack, and ${republished}`, async () => {
    const {
      rows: [{ id }],
    } = await t.sql.query<{ id: string }>(
      `SELECT id FROM outbox_event WHERE type = 'order.placed' ORDER BY occurred_at LIMIT 1`,
    );
    // As if the relay died between the broker's ack and its settle: the event is live again,
    // due now, without the relay's delivery.
    const { rowCount } = await t.sql.query(
      `UPDATE outbox_event
          SET deliveries = deliveries - $2::text, dispatched_at = NULL,
              next_attempt_at = now(), lease_expires_at = NULL
        WHERE id = $1 AND deliveries ? $2`,
      [id, driver.relayName],
    );
    expect(rowCount).toBe(1);
    await waitForRows(
      t.sql,
      `SELECT count(*)::int AS n FROM outbox_event WHERE id = '${id}' AND deliveries ? '${driver.relayName}'`,
      1,
      30_000,
    );
    const {
      rows: [row],
    } = await t.sql.query<{ attempts: number }>(`SELECT attempts FROM outbox_event WHERE id = $1`, [
      id,
    ]);
    expect(row.attempts).toBeGreaterThan(1);
    const copies = (await broker.takeOrders()).map((m) => m.id);
    expect(copies).toEqual(driver.dropsRepublishes ? [] : [id]);
  });

  it('fails an event the broker has nowhere to put after its tries, and says why', async () => {
    const [id] = await emitTogether(app, [orderEvent('invoice.lost', 1, 1)]);
    await waitForRows(
      t.sql,
      `SELECT count(*)::int AS n FROM outbox_event WHERE id = '${id}' AND dead_at IS NOT NULL`,
      1,
      30_000,
    );
    const {
      rows: [row],
    } = await t.sql.query<{ attempts: number; last_error: string | null }>(
      `SELECT attempts, last_error FROM outbox_event WHERE id = $1`,
      [id],
    );
    expect(row.attempts).toBe(3);
    expect(row.last_error).toBe(`${driver.relayName}: ${broker.unroutableError('invoice.lost')}`);
    // Nothing of it reached the orders destination.
    expect(await broker.takeOrders()).toEqual([]);
  });

  it('reports the connection in health', () => {
    const health = app.get(OutboxBridgeHealthIndicator).isHealthy();
    expect(health.brokers).toMatchObject({
      status: 'up',
      connections: {
        [`relay:${driver.relayName}`]: { kind: driver.kind, state: 'connected', lastError: null },
      },
    });
  });
}

/**
 * The transport with 3 % of `order.placed` publishes failing on their event's first try: the
 * retries then come after later events were claimed, which only an ordered relay keeps in their
 * places.
 */
function failingFirstTries(transport: OutboxRelayTransport): OutboxRelayTransport {
  const failedOnce = new Set<string>();
  return {
    ...transport,
    publish(message, signal) {
      const id = message.event.id;
      if (message.event.type === 'order.placed' && !failedOnce.has(id) && Math.random() < 0.03) {
        failedOnce.add(id);
        return Promise.reject(new Error('first try refused by the test'));
      }
      return transport.publish(message, signal);
    },
  };
}
