import type { INestApplication } from '@nestjs/common';
import { OutboxEngine } from '@app/outbox';
import {
  OutboxBridgeModule,
  type OutboxRelayMessage,
  type OutboxRelayTransport,
} from '@app/outbox/bridge';
import { createOutboxApp, emitEachCommitted, eventually } from './support/outbox-app';
import { invoicePaid } from './support/events';
import { useTestDatabase } from './support/test-database';

/**
 * A broker the test answers by hand: each publish waits until the test confirms or refuses it.
 * What is claimed is the engine's: slots, the window, settles on a real PostgreSQL.
 */
function heldBroker({ saysSent = true } = {}) {
  const sent: Array<{ id: string; confirm(): void; refuse(error: Error): void }> = [];
  const transport: OutboxRelayTransport = {
    kind: 'held',
    connect: () => Promise.resolve(),
    close: () => Promise.resolve(),
    status: () => ({
      kind: 'held',
      state: 'connected',
      since: new Date(0).toISOString(),
      lastError: null,
    }),
    publish: (message: OutboxRelayMessage, _signal: AbortSignal, written?: () => void) =>
      new Promise<void>((resolve, reject) => {
        sent.push({ id: message.event.id, confirm: resolve, refuse: reject });
        if (saysSent) written?.();
      }),
  };
  return { transport, sent };
}

describe('a relay sends past its slots, up to its window, and delivers on each confirm', () => {
  const fixture = useTestDatabase({ truncateEach: ['outbox_event'] });
  let app: INestApplication | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  async function relayApp(broker: ReturnType<typeof heldBroker>, maxInFlight: number) {
    app = await createOutboxApp({
      url: fixture.db.url,
      outbox: { concurrency: 2, tuning: { pollIntervalMs: 100 } },
      imports: [
        OutboxBridgeModule.forRoot({
          name: 'to-held',
          events: ['invoice.paid'],
          transport: broker.transport,
          maxInFlight,
        }),
      ],
    });
    return app;
  }

  const dispatched = async (ids: string[]) =>
    (
      await fixture.sql.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM outbox_event
         WHERE id = ANY($1) AND dispatched_at IS NOT NULL`,
        [ids],
      )
    ).rows[0].n;

  const emitInvoices = (app: INestApplication, n: number) =>
    emitEachCommitted(
      app,
      Array.from({ length: n }, () => invoicePaid()),
    );

  /** `n` messages out, and still `n` a while later: the relay sends no more until a confirm. */
  async function expectOutAtOnce(broker: ReturnType<typeof heldBroker>, n: number) {
    await eventually(`${n} messages out`, () => broker.sent.length === n);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(broker.sent).toHaveLength(n);
  }

  it('has more messages out than slots, never more than maxInFlight, and none delivered before its confirm', async () => {
    const broker = heldBroker();
    const started = await relayApp(broker, 5);
    const ids = await emitInvoices(started, 8);

    // Two slots, five messages out: the slots went back once each message was sent.
    await expectOutAtOnce(broker, 5);
    expect(started.get(OutboxEngine).slots.busy).toBeLessThanOrEqual(2);
    expect(await dispatched(ids)).toBe(0);

    broker.sent[0].refuse(new Error('broker said no'));
    for (const message of broker.sent.slice(1, 5)) message.confirm();
    await eventually('the rest sent', () => broker.sent.length === 8);
    for (const message of broker.sent.slice(5)) message.confirm();

    const refused = broker.sent[0].id;
    await eventually('seven delivered', async () => (await dispatched(ids)) === 7);
    const { rows } = await fixture.sql.query(
      `SELECT dispatched_at, failures ? 'to-held' AS failed FROM outbox_event WHERE id = $1`,
      [refused],
    );
    expect(rows[0]).toEqual({ dispatched_at: null, failed: true });
  });

  it('keeps the slot until the confirm with a transport that never says a message is sent', async () => {
    const broker = heldBroker({ saysSent: false });
    const started = await relayApp(broker, 5);
    const ids = await emitInvoices(started, 4);

    await expectOutAtOnce(broker, 2);
    for (const message of broker.sent.slice(0, 2)) message.confirm();
    await eventually('the other two sent', () => broker.sent.length === 4);
    for (const message of broker.sent.slice(2)) message.confirm();
    await eventually('four delivered', async () => (await dispatched(ids)) === 4);
  });

  it('waits at shutdown for the confirms of the messages it has out', async () => {
    const broker = heldBroker();
    const started = await relayApp(broker, 100);
    const ids = await emitEachCommitted(started, [invoicePaid(), invoicePaid(), invoicePaid()]);
    await eventually('three messages out', () => broker.sent.length === 3);

    const closing = started.close();
    app = undefined;
    await new Promise((resolve) => setTimeout(resolve, 300));
    for (const message of broker.sent) message.confirm();
    await closing;

    expect(await dispatched(ids)).toBe(3);
  });
});
