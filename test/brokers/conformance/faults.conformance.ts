import { Injectable, type INestApplication } from '@nestjs/common';
import { OnOutboxEvent, type OutboxEvent } from '@app/outbox';
import { OutboxBridgeHealthIndicator, type BrokerConnectionState } from '@app/outbox/bridge';
import { useTestDatabase } from '../../support/test-database';
import { startTcpProxy, type TcpProxy } from '../../support/tcp-proxy';
import type { BrokerDriver, BrokerUnderTest } from '../support/broker-driver';
import { expectEveryIdOnceOrRepublished } from '../support/message-checks';
import { emitTogether, orderEvent } from '../support/orders';
import { waitForRows } from '../support/wait';
import { createRelayApp } from '../support/bridge-outbox';

/**
 * A relay while the broker restarts or its network path goes silent: nothing lost; an event in
 * the broker twice only where the broker keeps republishes (RabbitMQ: same message id, after a
 * confirm lost with the connection; JetStream drops them by Nats-Msg-Id); and the engine goes on
 * delivering to local handlers all along.
 */
export function faultsConformance(driver: BrokerDriver): void {
  const t = useTestDatabase();
  let broker: BrokerUnderTest;
  let proxy: TcpProxy;
  let app: INestApplication;
  const local: string[] = [];
  const states = new Set<BrokerConnectionState>();

  @Injectable()
  class Local {
    @OnOutboxEvent('local-noop', { events: ['order.placed'] })
    noop(event: OutboxEvent) {
      local.push(event.id);
    }
  }

  beforeAll(async () => {
    broker = await driver.start();
    proxy = await startTcpProxy({ host: '127.0.0.1', port: broker.server.port });
    app = await createRelayApp(
      t.db.url,
      {
        name: driver.relayName,
        events: ['order.placed'],
        timeoutMs: 3000,
        transport: broker.relayTransport({ port: proxy.port, failFast: true }),
      },
      { retry: { baseMs: 100, maxMs: 1000, jitter: 0.2 }, maxAttempts: 100 },
      { providers: [Local] },
    );
  }, 90_000);

  afterAll(async () => {
    await app?.close();
    await proxy?.close();
    await broker?.remove();
  });

  /** Records every state health reports for the relay's connection until the returned stop. */
  const watchStates = () => {
    const timer = setInterval(() => {
      const health = app.get(OutboxBridgeHealthIndicator).isHealthy();
      states.add(health.brokers.connections[`relay:${driver.relayName}`].state);
    }, 20);
    return () => clearInterval(timer);
  };

  /** `count` events in one transaction, over 11 keys, n from `from` on. */
  const emit = (from: number, count: number) =>
    emitTogether(
      app,
      Array.from({ length: count }, (_, i) =>
        orderEvent('order.placed', (from + i) % 11, from + i),
      ),
    );

  /**
   * What the broker took since the last look is every emitted event: each once where it drops
   * republishes, otherwise repeats only of the same message id (counted on stdout).
   */
  async function expectRelayed(emitted: string[], what: string): Promise<void> {
    const ids = (await broker.takeOrders()).map((m) => m.id);
    if (driver.dropsRepublishes) {
      expect([...ids].sort()).toEqual([...emitted].sort());
      return;
    }
    const repeats = expectEveryIdOnceOrRepublished(ids, emitted);
    expect(ids.length).toBe(emitted.length + repeats);
    process.stdout.write(
      `${driver.name} (${what}): ${ids.length} messages for ${emitted.length} events, ` +
        `${repeats} republished duplicates\n`,
    );
  }

  const undelivered = `SELECT count(*)::int AS n FROM outbox_event WHERE dispatched_at IS NULL`;
  const twice = driver.dropsRepublishes
    ? 'stores nothing twice'
    : 'repeats only republishes of the same message id';

  it(`loses nothing, and ${twice}, while the broker restarts mid-run`, async () => {
    const stop = watchStates();
    const emitted: string[] = [];
    for (let batch = 0; batch < 30; batch++) {
      emitted.push(...(await emit(batch * 100, 100)));
      if (batch === 10) await broker.server.restart();
      if (batch === 20) await broker.server.kill().then(() => broker.server.start());
      await new Promise((r) => setTimeout(r, 20));
    }
    await waitForRows(t.sql, undelivered, 0, 90_000);
    stop();
    await expectRelayed(emitted, 'restarts');
    expect(local.filter((id) => emitted.includes(id))).toHaveLength(emitted.length);
    expect(states).toContain('reconnecting');
  }, 120_000);

  it('goes on delivering to local handlers while the broker path is black-holed, and catches up after', async () => {
    states.clear();
    const stop = watchStates();
    proxy.blackhole();
    proxy.setMode('hang');
    const blackholedAt = Date.now();
    const emitted = await emit(10_000, 200);
    // Local deliveries go on: the relay's failures cost their own slots only for their budget.
    await waitForRows(
      t.sql,
      `SELECT count(*)::int AS n FROM outbox_event WHERE deliveries ? 'local-noop' AND id = ANY('{${emitted.join(',')}}'::uuid[])`,
      200,
      15_000,
    );
    expect(Date.now() - blackholedAt).toBeLessThan(15_000);
    const { rows } = await t.sql.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM outbox_event WHERE deliveries ? $2 AND id = ANY($1::uuid[])`,
      [emitted, driver.relayName],
    );
    expect(rows[0].n).toBe(0);
    // The black hole lasts until the client has noticed it (its pings go unanswered), as one
    // in production would: the local deliveries above no longer wait for the relay's timeouts.
    const noticeBy = Date.now() + 30_000;
    while (!states.has('reconnecting') && Date.now() < noticeBy) {
      await new Promise((r) => setTimeout(r, 100));
    }
    proxy.setMode('forward');
    await waitForRows(t.sql, undelivered, 0, 60_000);
    stop();
    await expectRelayed(emitted, 'black hole');
    expect(states).toContain('reconnecting');
  }, 120_000);
}
