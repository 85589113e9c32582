import { delay } from '../../common/delay.util';
import { loadOptionalPackage } from '../../common/optional-package.util';
import { BrokerLink, type BrokerLinkOptions, type LinkEvents } from '../broker-link';

/*
 * What the transports use of the NATS packages, declared here: their own declarations reach
 * some types through subpath exports that a CommonJS build (moduleResolution node10) cannot
 * follow, which would leave them typed `any`.
 */
export interface NatsHeaders {
  keys(): string[];
  get(key: string): string;
  set(key: string, value: string): void;
}

/** A message as a core subscription receives it (a JetStream ack, for the relay). */
export interface NatsMessage {
  subject: string;
  data: Uint8Array;
  /** `code` is a status message's (503: no responders). */
  headers?: NatsHeaders & { code?: number };
}

export interface NatsConnection {
  publish(
    subject: string,
    data: Uint8Array,
    options: { reply: string; headers: NatsHeaders },
  ): void;
  subscribe(
    subject: string,
    options: { callback(error: Error | null, message: NatsMessage): void },
  ): unknown;
  status(): AsyncIterable<{ type: string; server?: string }>;
  closed(): Promise<void | Error>;
  drain(): Promise<void>;
  close(): Promise<void>;
}

/** A message a JetStream consumer handed over. */
export interface JsMessage {
  headers?: NatsHeaders;
  data: Uint8Array;
  subject: string;
  seq: number;
  info: { deliveryCount: number };
  ack(): void;
  nak(delayMs?: number): void;
  working(): void;
  term(reason?: string): void;
}

export interface JetStreamClient {
  publish(
    subject: string,
    data: Uint8Array,
    options: { msgID?: string; headers?: NatsHeaders; timeout?: number },
  ): Promise<{ duplicate: boolean }>;
  consumers: {
    get(
      stream: string,
      consumer: string,
    ): Promise<{
      consume(options: {
        max_messages: number;
        callback: (message: JsMessage) => void;
      }): Promise<{ close(): Promise<void | Error> }>;
    }>;
  };
}

export interface NatsPackages {
  core: {
    connect(options: Record<string, unknown>): Promise<NatsConnection>;
    headers(): NatsHeaders;
    nanos(ms: number): number;
    createInbox(prefix?: string): string;
  };
  jetstream: {
    jetstream(connection: NatsConnection, options?: { timeout?: number }): JetStreamClient;
    jetstreamManager(connection: NatsConnection): Promise<{
      consumers: {
        info(stream: string, consumer: string): Promise<unknown>;
        add(stream: string, config: Record<string, unknown>): Promise<unknown>;
      };
    }>;
    AckPolicy: { Explicit: string };
  };
}

const DRAIN_MS = 1000;

/** The NATS client packages, loaded when a NATS transport is created (optional peers). */
export function loadNats(): NatsPackages {
  const core = loadOptionalPackage<NatsPackages['core']>('@nats-io/transport-node');
  const jetstream = loadOptionalPackage<NatsPackages['jetstream']>('@nats-io/jetstream');
  if (!core || !jetstream) {
    throw new Error(
      'A NATS JetStream transport needs the packages @nats-io/transport-node and ' +
        '@nats-io/jetstream: npm install @nats-io/transport-node @nats-io/jetstream',
    );
  }
  return { core, jetstream };
}

/** `nats://host:port` of each server, without any credentials a URL may hold. */
export function serverLabel(servers: string | readonly string[]): string {
  const list = typeof servers === 'string' ? [servers] : servers;
  return list.map(hostOf).join(',');
}

/**
 * `scheme://host:port` of one server, whatever credentials it holds: everything up to the last
 * `@` goes (a password may hold `/` or `@`), and so does any path.
 */
function hostOf(server: string): string {
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(server)?.[0] ?? '';
  const rest = server.slice(scheme.length);
  const host = rest.slice(rest.lastIndexOf('@') + 1).split(/[/?#]/)[0];
  return `${scheme}${host}`;
}

/**
 * A link to NATS. The client reconnects by itself once connected (forever, with its own jittered
 * wait) and reports it through its status stream; the link opens a new client only when the
 * first connection fails or the client closes for good.
 */
export function natsLink(
  nats: NatsPackages,
  label: string,
  servers: string | readonly string[],
  connectOptions: Record<string, unknown>,
  link: BrokerLinkOptions,
): BrokerLink<NatsConnection> {
  return new BrokerLink<NatsConnection>('nats-jetstream', label, link, {
    open: async (events: LinkEvents) => {
      const connection = await nats.core.connect({
        // Pings find a connection that went silent (a black-holed network path) within about
        // 15 s rather than the client's default 4 minutes; the client then reconnects.
        pingInterval: 5000,
        maxPingOut: 2,
        // Otherwise every request (each JetStream publish and its ack) builds an Error up front
        // to hold its caller's stack: a fifth of a relay's CPU, for a stack the error the relay
        // records (its message) never shows.
        noAsyncTraces: true,
        ...connectOptions,
        servers: typeof servers === 'string' ? servers : [...servers],
        timeout: link.connectTimeoutMs,
        reconnect: true,
        maxReconnectAttempts: -1,
        reconnectTimeWait: link.reconnect.baseMs,
      });
      void follow(connection, events);
      return connection;
    },
    // A drain flushes what is in flight; on a connection that is down it would wait for the
    // reconnect, so it gets a moment, then the client is closed, which stops its reconnects.
    close: async (connection) => {
      const bound = delay(DRAIN_MS);
      await Promise.race([connection.drain().catch(() => undefined), bound.promise]);
      bound.cancel();
      await connection.close();
    },
  });
}

async function follow(connection: NatsConnection, events: LinkEvents): Promise<void> {
  for await (const status of connection.status()) {
    if (status.type === 'disconnect') events.down(new Error(`disconnected from ${status.server}`));
    else if (status.type === 'reconnect') events.up();
  }
  const closed = await connection.closed();
  events.closed(closed ?? new Error('connection closed'));
}
