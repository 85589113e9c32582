import { BrokerLink, type LinkEvents } from './broker-link';
import { serverLabel } from './nats/nats.client';

/**
 * The link's bookkeeping against a scripted driver: which client is current, what is closed,
 * and how many connections a loss opens. The transports' behaviour on real brokers is proven in
 * test/brokers.
 */

interface Client {
  n: number;
  events: LinkEvents;
}

function scriptedLink() {
  const opened: Client[] = [];
  const closed: number[] = [];
  const link = new BrokerLink<Client>(
    'test',
    'test link',
    { connectTimeoutMs: 200, reconnect: { baseMs: 20, maxMs: 20 } },
    {
      open: (events) => {
        const client = { n: opened.length + 1, events };
        opened.push(client);
        return Promise.resolve(client);
      },
      close: (client) => {
        closed.push(client.n);
        return Promise.resolve();
      },
    },
  );
  return { link, opened, closed };
}

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

it('opens one new connection for a loss two channels of the old one report, and closes the old one', async () => {
  const { link, opened, closed } = scriptedLink();
  await link.connect();
  expect(link.current()?.n).toBe(1);
  // Two channels of connection 1 report its loss, one after the other.
  opened[0].events.closed(new Error('channel 1 closed'));
  opened[0].events.closed(new Error('channel 2 closed'));
  await tick(100);
  expect(opened.map((c) => c.n)).toEqual([1, 2]);
  expect(closed).toEqual([1]);
  expect(link.current()?.n).toBe(2);
  expect(link.status().state).toBe('connected');
  // A late report of connection 1 changes nothing now.
  opened[0].events.closed(new Error('late'));
  opened[0].events.up();
  await tick(60);
  expect(opened).toHaveLength(2);
  await link.close(100);
  expect(closed).toEqual([1, 2]);
  expect(link.status().state).toBe('closed');
});

it('keeps to its backoff when every connection is lost as soon as it opens', async () => {
  const { link, opened } = scriptedLink();
  await link.connect();
  const started = Date.now();
  for (let i = 0; i < 5; i++) {
    const before = opened.length;
    opened[opened.length - 1].events.closed(new Error('lost'));
    while (opened.length === before) await tick(1);
  }
  // Each loss waits its backoff (20 ms, less up to 20 %) before the next connection.
  expect(opened.length).toBe(6);
  expect(Date.now() - started).toBeGreaterThanOrEqual(5 * 16);
  await link.close(100);
});

it('names NATS servers without any credentials they hold', () => {
  expect(
    serverLabel(['nats://u:p/ss@host:4222', 'user:pass@other:4222', 'tls://u:p@ss@third']),
  ).toBe('nats://host:4222,other:4222,tls://third');
});
