import { connect as amqpConnect } from 'amqplib';
import { connect as natsConnect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { startNatsServer, startRabbitMq, type BrokerServer } from '../../support/broker-servers';
import { tally } from '../support/counts';
import { createFaultDatabase, type FaultDatabase } from '../support/database';
import { drainAll } from '../support/drain';
import type { FaultBroker, StreamReport } from '../support/ipc';
import { killInTurn } from '../support/kill-loop';
import type { FaultChild } from '../support/processes';
import { ms, type Outcome, type Scenario, type ScenarioContext } from '../support/scenario';

/**
 * Service A's outbox → a broker → service B's inbox → a transactional handler in B, each service
 * on a database of its own, while A's and B's workers are SIGKILLed in turn (a relay killed
 * between the broker's confirm and its settle publishes again; an inbox killed between its
 * commit and its ack receives again). Every event A emitted must have its effect in B exactly
 * once: the effect is a plain INSERT without a unique constraint, so only the stream's
 * deduplication, the inbox's idempotent emit and the transactional handler can keep it single.
 */
function acrossServices(kind: FaultBroker['kind']): Scenario {
  const name = kind === 'nats' ? 'NATS JetStream' : 'RabbitMQ';
  return {
    name: `across-${kind === 'nats' ? 'nats' : 'rabbitmq'}`,
    title: `service A → ${name} → service B, SIGKILL of A's relays and B's inboxes`,
    async run(ctx, outcome) {
      const broker = await startBroker(kind);
      const dbB = await createFaultDatabase(ctx.server, `${ctx.db.name}_b`);
      try {
        const emitted = await runAcross(ctx, outcome, broker.config, dbB);
        const held = await broker.messages();
        if (kind === 'nats') {
          // Every republish after a kill carried its event's Nats-Msg-Id: the stream kept one.
          outcome.figure('NATS JetStream: messages in the stream', held);
          outcome.checkZero('copies in the stream beyond one per event', held - emitted);
        } else {
          outcome.checkZero('RabbitMQ: messages left in the queue after the drain', held);
        }
      } finally {
        await dbB.close();
        await broker.server.remove();
      }
    },
  };
}

export const acrossNats = acrossServices('nats');
export const acrossRabbitMq = acrossServices('rabbitmq');

async function runAcross(
  ctx: ScenarioContext,
  outcome: Outcome,
  broker: FaultBroker,
  dbB: FaultDatabase,
): Promise<number> {
  const kills = ctx.quick ? 6 : 16;
  const common = { handlerDelayMs: 30, outbox: { concurrency: 8, batchSize: 40 } };
  let nextA = 0;
  let nextB = 0;
  const spawnA = () =>
    ctx.spawnWorker(`a-${++nextA}`, { ...common, bridge: { broker, relay: true } });
  const spawnB = () =>
    ctx.spawnWorker(`b-${++nextB}`, {
      ...common,
      url: dbB.url,
      recordUrl: dbB.url,
      bridge: { broker, inbox: true },
    });
  const workersA: FaultChild[] = [spawnA(), spawnA()];
  const workersB: FaultChild[] = [spawnB(), spawnB()];
  await Promise.all([...workersA, ...workersB].map((w) => w.ready()));
  const producer = await ctx.producer();
  await producer.request({ cmd: 'stream-start', perSecond: 150, batch: 3, kind: 'tx' });

  const [roundsA, roundsB] = await Promise.all([
    killInTurn(workersA, spawnA, kills / 2, [300, 900]),
    killInTurn(workersB, spawnB, kills / 2, [300, 900]),
  ]);
  const stream = await producer.request<StreamReport>({ cmd: 'stream-stop' }, 30_000);
  ctx.note(`${kills} kills done, ${stream.committed} events emitted; draining both services`);
  const drainA = await drainAll(ctx.db, 90_000);
  const [{ n: emitted }] = await ctx.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM fault_emitted`,
  );
  const startedB = Date.now();
  let received = 0;
  while (Date.now() - startedB < 90_000) {
    [{ n: received }] = await dbB.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM outbox_event WHERE type = 'fault.tx'`,
    );
    if (received >= emitted) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const drainB = await drainAll(dbB, 90_000);
  const effects = await effectsInB(ctx.db, dbB);

  outcome.figure('SIGKILLs of A (relay)', roundsA.kills);
  outcome.figure('  with handlers running', roundsA.midHandler);
  outcome.figure('SIGKILLs of B (inbox)', roundsB.kills);
  outcome.figure('events emitted in A', emitted);
  outcome.figure('events received in B', received);
  outcome.figure('drain of A after the last kill', ms(drainA));
  outcome.figure('drain of B after that', ms(drainB));
  const a = await tally(ctx.db);
  outcome.tally(a);
  const b = await tally(dbB);
  outcome.checkZero('B: duplicate deliveries', b.duplicateDeliveries);
  outcome.checkZero('B: live rows left after the drain', b.stillLive);
  outcome.checkZero("A's events without their effect in B", effects.missing);
  outcome.checkZero("effects in B beyond one per A's event", effects.extra);
  outcome.checkZero('effects in B of no event of A', effects.stray);
  outcome.check('kills landed while relays ran', roundsA.midHandler > 0, roundsA.midHandler);
  outcome.summary.recover = `drain A ${ms(drainA)}, B ${ms(drainB)}`;
  return emitted;
}

/** Each event A emitted against the effect rows of B's transactional handler. */
async function effectsInB(
  dbA: FaultDatabase,
  dbB: FaultDatabase,
): Promise<{ missing: number; extra: number; stray: number }> {
  const emitted = await dbA.query<{ id: string }>(`SELECT event_id AS id FROM fault_emitted`);
  const rows = await dbB.query<{ id: string; n: number }>(
    `SELECT event_id AS id, count(*)::int AS n FROM fault_effect
     WHERE handler = 'fault-tx' GROUP BY event_id`,
  );
  const counts = new Map(rows.map((r) => [r.id, r.n]));
  let missing = 0;
  let extra = 0;
  for (const { id } of emitted) {
    const n = counts.get(id) ?? 0;
    if (n === 0) missing++;
    extra += Math.max(0, n - 1);
    counts.delete(id);
  }
  return { missing, extra, stray: counts.size };
}

interface Broker {
  server: BrokerServer;
  config: FaultBroker;
  /** What the broker holds now: the stream's messages, or the messages the queue saw. */
  messages(): Promise<number>;
}

async function startBroker(kind: FaultBroker['kind']): Promise<Broker> {
  if (kind === 'nats') {
    const server = await startNatsServer();
    const client = await natsConnect({ servers: server.url });
    const jsm = await jetstreamManager(client);
    await jsm.streams.add({ name: 'FAULTS', subjects: ['outbox.fault.>'] });
    await client.close();
    return {
      server,
      config: { kind, servers: server.url, stream: 'FAULTS', consumer: 'service-b' },
      async messages() {
        const c = await natsConnect({ servers: server.url });
        const info = await (await jetstreamManager(c)).streams.info('FAULTS');
        await c.close();
        return info.state.messages;
      },
    };
  }
  const server = await startRabbitMq();
  const connection = await amqpConnect(server.url);
  const channel = await connection.createChannel();
  await channel.assertExchange('faults', 'topic', { durable: true });
  await channel.assertQueue('service-b', { durable: true });
  await channel.bindQueue('service-b', 'faults', '#');
  await connection.close();
  return {
    server,
    config: { kind, url: server.url, exchange: 'faults', queue: 'service-b' },
    // Consumed and acked: what is left is what B has not taken yet (0 after the drain).
    async messages() {
      const c = await amqpConnect(server.url);
      const ch = await c.createChannel();
      const { messageCount } = await ch.checkQueue('service-b');
      await c.close();
      return messageCount;
    },
  };
}
