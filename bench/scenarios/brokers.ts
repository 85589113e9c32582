import { performance } from 'node:perf_hooks';
import type { Client } from 'pg';
import { connect as amqpConnect } from 'amqplib';
import { connect as natsConnect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import { OutboxEngine } from '../../libs/outbox/src';
import {
  OutboxBridgeModule,
  OutboxInboxModule,
  natsJetStream,
  natsJetStreamInbox,
  rabbitMq,
  rabbitMqInbox,
  relayMessage,
  type OutboxInboxTransport,
  type OutboxRelayTransport,
} from '../../libs/outbox/src/bridge';
import {
  startNatsServer,
  startRabbitMq,
  type BrokerServer,
} from '../../test/support/broker-servers';
import { createOutboxApp } from '../support/app';
import { describeBurnDown, timeBurnDown, type BurnDown } from '../support/burn-down';
import { loadKeyed } from '../support/keyed-backlog';
import { bareJetStreamRate, bareRabbitMqRate } from '../support/bare-consumers';
import { EVENTS } from '../support/config';
import { insertEvents, sleep, waitUntilSettled, withFreshDatabase } from '../support/database';
import { sampleEvent } from '../support/events';
import { processGroupCpuSeconds } from '../support/process-stats';
import { count, note, times, type Figure } from '../support/report';
import type { Scenario } from './scenario';

const TIMEOUT_MS = 180_000;
const KEYS = 1000;

interface Broker {
  name: string;
  server: BrokerServer;
  relay(): OutboxRelayTransport;
  inbox(): OutboxInboxTransport;
  /** A consumer that only reads and acks `total` messages: messages/s. */
  bare(total: number): Promise<number>;
  /** Whether what a consumer acks leaves the broker (a queue) rather than stays (a stream). */
  ackRemoves: boolean;
}

/** A JetStream stream and a RabbitMQ queue, each taking every relayed event. */
async function withBrokers<T>(run: (brokers: Broker[]) => Promise<T>): Promise<T> {
  const nats = await startNatsServer();
  const rabbit = await startRabbitMq();
  try {
    const client = (await natsConnect({ servers: nats.url })) as NatsConnection;
    await (await jetstreamManager(client)).streams.add({ name: 'BENCH', subjects: ['outbox.>'] });
    await client.close();
    const connection = await amqpConnect(rabbit.url);
    const channel = await connection.createChannel();
    await channel.assertExchange('bench', 'topic', { durable: true });
    await channel.assertQueue('bench', { durable: true });
    await channel.bindQueue('bench', 'bench', '#');
    await connection.close();
    return await run([
      {
        name: 'NATS JetStream',
        server: nats,
        relay: () => natsJetStream({ servers: nats.url }),
        inbox: () => natsJetStreamInbox({ servers: nats.url, stream: 'BENCH', consumer: 'bench' }),
        bare: (total) => bareJetStreamRate(nats.url, 'BENCH', total),
        ackRemoves: false,
      },
      {
        name: 'RabbitMQ',
        server: rabbit,
        relay: () => rabbitMq({ url: rabbit.url, exchange: 'bench' }),
        inbox: () => rabbitMqInbox({ url: rabbit.url, queue: 'bench' }),
        bare: (total) => bareRabbitMqRate(rabbit.url, 'bench', total),
        ackRemoves: true,
      },
    ]);
  } finally {
    await Promise.all([nats.remove(), rabbit.remove()]);
  }
}

interface RelayRun {
  rate: number;
  /** CPU µs per event of this process (the engine and its relay), and of the broker's processes. */
  cpu: { process: number; broker: number };
}

/**
 * Burn-down of a fresh backlog of EVENTS rows through the given app's engine: events/s, and the
 * CPU it took here and in `broker`'s processes (which share this machine's cores).
 */
async function burnDown(
  sql: Client,
  url: string,
  setup: { handler: 'noop' | null; imports?: Parameters<typeof createOutboxApp>[1]['imports'] },
  broker?: BrokerServer,
): Promise<RelayRun> {
  await sql.query('TRUNCATE outbox_event');
  await insertEvents(sql, EVENTS);
  await sql.query('VACUUM ANALYZE outbox_event');
  const app = await createOutboxApp(url, { ...setup, autoStart: false });
  try {
    const brokerCpu = () =>
      broker?.processGroup === undefined ? 0 : processGroupCpuSeconds(broker.processGroup);
    const processBefore = process.cpuUsage();
    const brokerBefore = brokerCpu();
    const started = performance.now();
    await app.get(OutboxEngine).start();
    if (!(await waitUntilSettled(sql, TIMEOUT_MS, 20))) throw new Error('backlog not drained');
    const rate = EVENTS / ((performance.now() - started) / 1000);
    const used = process.cpuUsage(processBefore);
    return {
      rate,
      cpu: {
        process: (used.user + used.system) / EVENTS,
        broker: ((brokerCpu() - brokerBefore) * 1e6) / EVENTS,
      },
    };
  } finally {
    await app.close();
  }
}

/** `this process 61 µs + broker 48 µs` per event. */
function describeCpu({ cpu }: RelayRun): string {
  return `CPU per event: this process ${count(cpu.process)} µs + broker ${count(cpu.broker)} µs`;
}

/**
 * The relay's burn-down of EVENTS events over KEYS keys (event i in key i mod KEYS), emitted
 * through the app's publisher so an ordered relay's events are sequenced as in production.
 */
async function keyedRelay(
  sql: Client,
  url: string,
  broker: Broker,
  ordered: boolean,
): Promise<BurnDown> {
  const label = `${ordered ? 'ordered' : 'unordered'} relay to ${broker.name}, ${KEYS} keys`;
  const app = await createOutboxApp(url, {
    handler: null,
    autoStart: false,
    imports: [
      OutboxBridgeModule.forRoot({
        name: 'bench-relay',
        events: ['invoice.paid'],
        ordered,
        transport: broker.relay(),
      }),
    ],
  });
  try {
    await loadKeyed(app, sql, EVENTS, (i) => `key-${i % KEYS}`, label);
    const run = await timeBurnDown(app, sql, EVENTS, TIMEOUT_MS);
    note(`${label}: ${describeBurnDown(run, TIMEOUT_MS)}`);
    return run;
  } finally {
    await app.close();
  }
}

/**
 * Relay throughput: the backlog relayed to each broker (delivered on its confirm), next to the
 * same backlog burnt down by a no-op handler in the same run.
 */
export const relay: Scenario = {
  name: 'relay',
  title: `relay of ${EVENTS} events to NATS JetStream and RabbitMQ vs the no-op burn-down, ordered and not`,
  run: (server) =>
    withFreshDatabase(server, 'relay', (db) =>
      withBrokers(async (brokers) => {
        const noopRun = await burnDown(db.sql, db.url, { handler: 'noop' });
        const noop = noopRun.rate;
        note(`no-op burn-down: ${count(noop)} events/s, ${describeCpu(noopRun)}`);
        const figures: Figure[] = [];
        for (const broker of brokers) {
          const run = await burnDown(
            db.sql,
            db.url,
            {
              handler: null,
              imports: [
                OutboxBridgeModule.forRoot({
                  name: 'bench-relay',
                  events: ['invoice.paid'],
                  transport: broker.relay(),
                }),
              ],
            },
            broker.server,
          );
          note(`relay to ${broker.name}: ${count(run.rate)} events/s, ${describeCpu(run)}`);
          figures.push(
            {
              figure: `relay to ${broker.name} vs no-op burn-down`,
              value: `${count(run.rate)} vs ${count(noop)} events/s = ${times(run.rate / noop)}`,
              target: '≥ 0.8 ×',
            },
            {
              figure: `relay to ${broker.name}: CPU µs per event, this process + broker (no-op: ${count(noopRun.cpu.process)})`,
              value: `${count(run.cpu.process)} + ${count(run.cpu.broker)}`,
              target: 'report',
            },
          );
        }
        for (const broker of brokers) {
          const ordered = await keyedRelay(db.sql, db.url, broker, true);
          const unordered = await keyedRelay(db.sql, db.url, broker, false);
          figures.push({
            figure: `ordered relay to ${broker.name} over ${KEYS} keys vs unordered`,
            value: `${count(ordered.rate)} vs ${count(unordered.rate)} events/s = ${times(ordered.rate / unordered.rate)}`,
            target: '≥ 0.7 ×',
          });
        }
        return figures;
      }),
    ),
};

/**
 * Inbox receive rate: EVENTS messages waiting in each broker, received into an empty outbox
 * (emitted in one transaction per batch, acked after the commit), engine off; beside a consumer
 * of the same messages that only reads and acks them.
 */
export const inbox: Scenario = {
  name: 'inbox',
  title: `inbox receive of ${EVENTS} messages from NATS JetStream and RabbitMQ`,
  run: (server) =>
    withFreshDatabase(server, 'inbox', (db) =>
      withBrokers(async (brokers) => {
        const figures: Figure[] = [];
        for (const broker of brokers) {
          await fill(broker.relay(), EVENTS);
          await db.sql.query('TRUNCATE outbox_event');
          // From the inbox's connect, as the bare consumer's: the app's boot before it is not
          // the inbox's receive rate.
          const transport = broker.inbox();
          let started = Infinity;
          const connect = transport.connect.bind(transport);
          transport.connect = () => {
            started = performance.now();
            return connect();
          };
          const app = await createOutboxApp(db.url, {
            handler: null,
            autoStart: false,
            imports: [OutboxInboxModule.forRoot({ name: 'bench-inbox', transport })],
          });
          let rate: number;
          try {
            await waitForRows(db.sql, EVENTS);
            rate = EVENTS / ((performance.now() - started) / 1000);
            note(`inbox from ${broker.name}: ${count(rate)} messages/s (connect included)`);
          } finally {
            await app.close();
          }
          if (broker.ackRemoves) await fill(broker.relay(), EVENTS);
          const bare = await broker.bare(EVENTS);
          note(`bare consumer of ${broker.name}: ${count(bare)} messages/s (connect included)`);
          figures.push({
            figure: `inbox receive from ${broker.name} vs a bare consumer`,
            value: `${count(rate)} vs ${count(bare)} messages/s = ${times(rate / bare)}`,
            target: '≥ 0.7 ×',
          });
        }
        return figures;
      }),
    ),
};

/** Publishes `total` relayed messages through the transport, 200 in flight. */
async function fill(transport: OutboxRelayTransport, total: number): Promise<void> {
  await transport.connect();
  const signal = new AbortController().signal;
  const occurredAt = new Date();
  try {
    for (let first = 0; first < total; first += 200) {
      await Promise.all(
        Array.from({ length: Math.min(200, total - first) }, (_, k) => {
          const i = first + k;
          const event = {
            ...sampleEvent(i),
            id: crypto.randomUUID(),
            organizationId: 'org-1',
            requestId: `req-${i}`,
            metadata: {},
            occurredAt,
            causationId: null,
            correlationId: null,
            orderingKey: `invoice:inv-${i}`,
          };
          return transport.publish(relayMessage(event), signal);
        }),
      );
    }
  } finally {
    await transport.close(5000);
  }
}

async function waitForRows(sql: Client, expected: number): Promise<void> {
  const deadline = performance.now() + TIMEOUT_MS;
  while (performance.now() < deadline) {
    const { rows } = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox_event');
    if (rows[0].n >= expected) return;
    await sleep(20);
  }
  throw new Error(`inbox: fewer than ${expected} rows after ${TIMEOUT_MS} ms`);
}
