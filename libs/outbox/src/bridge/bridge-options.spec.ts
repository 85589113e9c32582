import { InvalidOutboxOptionsError } from '../outbox.errors';
import { natsJetStream } from './nats/nats-jetstream.relay';
import { natsJetStreamInbox } from './nats/nats-jetstream.inbox';
import { rabbitMq } from './rabbitmq/rabbitmq.relay';
import { rabbitMqInbox } from './rabbitmq/rabbitmq.inbox';
import { OutboxBridgeModule } from './outbox-bridge.module';
import { OutboxInboxModule } from './outbox-inbox.module';
import type { OutboxRelayTransport } from './bridge.types';

/** Bad transport and module options fail where they are given, naming each field. */

function problems(build: () => unknown): Array<{ path: string; value: unknown }> {
  try {
    build();
  } catch (error) {
    if (error instanceof InvalidOutboxOptionsError) {
      return error.problems.map(({ path, value }) => ({ path, value }));
    }
    throw error;
  }
  throw new Error('no error thrown');
}

it('names every bad field of a NATS relay', () => {
  expect(
    problems(() =>
      natsJetStream({
        servers: [],
        subject: 'outbox' as never,
        publishTimeoutMs: 0,
        reconnect: { baseMs: -1 },
      }),
    ),
  ).toEqual([
    { path: 'transport.servers', value: [] },
    { path: 'transport.subject', value: 'outbox' },
    { path: 'transport.publishTimeoutMs', value: 0 },
    { path: 'transport.reconnect.baseMs', value: -1 },
  ]);
});

it('names the missing stream and consumer of a NATS inbox', () => {
  expect(
    problems(() => natsJetStreamInbox({ servers: 'nats://x:4222' } as never)).map((p) => p.path),
  ).toEqual(['transport.stream', 'transport.consumer']);
});

it('refuses a RabbitMQ URL of another scheme without showing its password', () => {
  const found = problems(() => rabbitMq({ url: 'http://user:s3cret@host', exchange: 'x' }));
  expect(found.map((p) => p.path)).toEqual(['transport.url']);
  expect(JSON.stringify(found)).not.toContain('s3cret');
  expect(problems(() => rabbitMqInbox({ url: 'amqp://h', queue: '' })).map((p) => p.path)).toEqual([
    'transport.queue',
  ]);
});

it('refuses a relay or an inbox module without a working transport', () => {
  expect(
    problems(() =>
      OutboxBridgeModule.forRoot({
        name: 'to-x',
        events: ['a'],
        transport: { kind: 'x' } as unknown as OutboxRelayTransport,
        closeTimeoutMs: 0,
        maxInFlight: 2.5,
      }),
    ).map((p) => p.path),
  ).toEqual([
    'transport.connect',
    'transport.publish',
    'transport.close',
    'transport.status',
    'closeTimeoutMs',
    'maxInFlight',
  ]);
  expect(
    problems(() =>
      OutboxInboxModule.forRoot({ name: 'From X', transport: undefined as never, retryDelayMs: 0 }),
    ).map((p) => p.path),
  ).toEqual([
    'name',
    'transport.connect',
    'transport.consume',
    'transport.close',
    'transport.status',
    'retryDelayMs',
  ]);
});
