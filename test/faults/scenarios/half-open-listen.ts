import { startTcpProxy } from '../../support/tcp-proxy';
import { drainAll } from '../support/drain';
import { deliveryLatency, firstCallAt, tally } from '../support/counts';
import type { EmitReport, WorkerStatus } from '../support/ipc';
import { sleep, waitUntil, type FaultChild } from '../support/processes';
import { ms, type Scenario } from '../support/scenario';

const LISTEN = {
  probeIntervalMs: 500,
  queryTimeoutMs: 500,
  reconnectMinMs: 100,
  reconnectMaxMs: 1000,
};
/** Long enough that only a NOTIFY can explain a delivery within the scenario. */
const POLL_INTERVAL_MS = 60_000;

/**
 * The worker's LISTEN connection goes through a TCP proxy that, at a given moment, stops
 * relaying bytes on the open connection without closing anything: a half-open socket that
 * raises no event. The listener's probe must notice, replace the connection, drain what it
 * missed (an event emitted while the socket was dead) and be woken by NOTIFY again (an event
 * emitted after). The poll is a minute away, so a quick delivery can only come from NOTIFY.
 */
export const halfOpenListen: Scenario = {
  name: 'half-open-listen',
  title: 'half-open LISTEN socket replaced; NOTIFY wakes again',
  async run(ctx, outcome) {
    const cycles = ctx.quick ? 2 : 4;
    const target = new URL(ctx.db.url);
    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
    try {
      const proxied = new URL(ctx.db.url);
      proxied.port = String(proxy.port);
      const producer = await ctx.producer();
      const worker = await ctx.worker('worker', {
        outbox: {
          pollIntervalMs: POLL_INTERVAL_MS,
          listen: { ...LISTEN, connectionString: proxied.toString() },
        },
      });
      await waitForListener(worker, (state) => state === 'listening', 10_000);
      const emitOne = async () =>
        (await producer.request<EmitReport>({ cmd: 'emit', count: 1, batch: 1, kind: 'work' }))
          .ids[0];
      const latencyOf = async (eventId: string, timeoutMs: number) => {
        await waitUntil(async () => (await firstCallAt(ctx.db, eventId)) !== null, timeoutMs, 10);
        return deliveryLatency(ctx.db, eventId);
      };

      const baseline = await latencyOf(await emitOne(), 10_000);
      outcome.figure('NOTIFY latency before any fault', ms(baseline));
      outcome.figure(
        'detection bound (probe + query timeout + first reconnect delay)',
        ms(LISTEN.probeIntervalMs + LISTEN.queryTimeoutMs + LISTEN.reconnectMinMs),
      );

      let replaced = 0;
      let caughtUp = 0;
      let woken = 0;
      for (let cycle = 1; cycle <= cycles; cycle++) {
        // Let the last delivery settle and the idle-floor drain pass, so the only timer left
        // is the poll a minute away.
        await sleep(1000);
        const links = proxy.connections.length;
        const deadLink = proxy.connections[links - 1];
        const blackholedAt = Date.now();
        proxy.blackhole();
        // Its NOTIFY goes into the dead socket: only the drain after reconnecting can find it.
        const missed = await emitOne();
        const gotNew = await waitUntil(() => proxy.connections.length > links, 20_000, 5);
        const newLinkAt = gotNew ? proxy.connections[links].acceptedAt : NaN;
        const listening = await waitForListener(worker, (state) => state === 'listening', 20_000);
        const recoveredAt = Date.now();
        const missedLatency = await latencyOf(missed, 20_000);
        const fresh = await emitOne();
        const freshLatency = await latencyOf(fresh, POLL_INTERVAL_MS);
        const freshCalledAt = await firstCallAt(ctx.db, fresh);
        if (gotNew && listening && deadLink.clientClosed) replaced++;
        if (missedLatency !== null) caughtUp++;
        // The last drain ran at reconnection at the earliest, so the poll is at least this far.
        if (freshCalledAt !== null && freshCalledAt < recoveredAt + POLL_INTERVAL_MS) woken++;
        ctx.note(
          `cycle ${cycle}: new LISTEN connection ${ms(newLinkAt - blackholedAt)} after the socket went silent; ` +
            `missed event delivered after ${ms(missedLatency)}, next one after ${ms(freshLatency)}`,
        );
        outcome.figure(
          `cycle ${cycle}: replacement connection after`,
          ms(newLinkAt - blackholedAt),
        );
        outcome.figure(
          `cycle ${cycle}: event emitted into the dead socket, delivered after`,
          ms(missedLatency),
        );
        outcome.figure(
          `cycle ${cycle}: event emitted after recovery, delivered after`,
          ms(freshLatency),
        );
        outcome.summary.recover = `relisten ${ms(newLinkAt - blackholedAt)}`;
      }
      outcome.check(
        'dead socket closed by the client and replaced',
        replaced === cycles,
        `${replaced}/${cycles}`,
      );
      outcome.check(
        'event missed while half-open delivered by the catch-up drain',
        caughtUp === cycles,
        `${caughtUp}/${cycles}`,
      );
      outcome.check(
        'event after recovery delivered before the poll would fire',
        woken === cycles,
        `${woken}/${cycles}`,
      );
      outcome.check('worker process alive', worker.alive, worker.alive ? 'yes' : 'no');
      // The last handler has run; its settle may still be on its way.
      await drainAll(ctx.db, 10_000);
      outcome.tally(await tally(ctx.db));
    } finally {
      await proxy.close();
    }
  },
};

async function waitForListener(
  worker: FaultChild,
  accept: (state: string) => boolean,
  timeoutMs: number,
): Promise<boolean> {
  return waitUntil(
    async () => accept((await worker.request<WorkerStatus>({ cmd: 'status' })).listener),
    timeoutMs,
    10,
  );
}
