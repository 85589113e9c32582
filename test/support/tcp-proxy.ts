import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * What the proxy does with a connection it accepts:
 * - forward: relay bytes both ways to the target;
 * - refuse: close it at once, as a server that is restarting would;
 * - hang: keep it open and answer nothing, as a host behind a black-holing firewall would.
 */
export type TcpProxyMode = 'forward' | 'refuse' | 'hang';

export interface ProxiedConnection {
  /** Accepted at, in `Date.now()` milliseconds. */
  readonly acceptedAt: number;
  /** The proxy stopped relaying this connection's bytes (both ways) but kept both sockets open. */
  readonly blackholed: boolean;
  /** The client sent its FIN or closed: for a black-holed connection, proof it gave up on it. */
  readonly clientClosed: boolean;
}

export interface TcpProxy {
  readonly port: number;
  /** Every connection accepted so far, in order. */
  readonly connections: readonly ProxiedConnection[];
  /** Applies to connections accepted from now on. */
  setMode(mode: TcpProxyMode): void;
  /**
   * Relays connections accepted from now on to `target` (open ones keep theirs), as a virtual
   * address moved to another host does.
   */
  retarget(target: { host: string; port: number }): void;
  /**
   * Makes every open connection half-open: bytes are dropped in both directions, neither side
   * is closed and no close is passed on. New connections are not affected.
   */
  blackhole(): void;
  /** Resets every open connection (a TCP RST both ways), as a dropped NAT entry or failover does. */
  reset(): void;
  /** Destroys every socket and stops listening. */
  close(): Promise<void>;
}

interface Link extends ProxiedConnection {
  blackholed: boolean;
  clientClosed: boolean;
}

/**
 * A local TCP relay in front of `target`, for faults a real server cannot be asked to produce:
 * refused connections, connects that hang, and half-open connections that raise no event.
 */
export async function startTcpProxy(
  initialTarget: { host: string; port: number },
  options: { port?: number; mode?: TcpProxyMode } = {},
): Promise<TcpProxy> {
  let target = initialTarget;
  let mode: TcpProxyMode = options.mode ?? 'forward';
  const links: Link[] = [];
  const sockets = new Set<Socket>();

  const track = (socket: Socket) => {
    sockets.add(socket);
    // Resets are expected here (that is the point of the proxy); unhandled they would crash.
    socket.on('error', () => undefined);
    socket.once('close', () => sockets.delete(socket));
  };

  // allowHalfOpen: Node would otherwise answer a client's FIN with its own, which a black-holed
  // link must not do (a client's end() on a half-open socket waits for a FIN that never comes).
  const server: Server = createServer({ allowHalfOpen: true }, (client) => {
    track(client);
    const link: Link = { acceptedAt: Date.now(), blackholed: false, clientClosed: false };
    links.push(link);
    const closed = () => (link.clientClosed = true);
    client.once('end', closed);
    client.once('close', closed);
    if (mode === 'refuse') {
      client.destroy();
      return;
    }
    if (mode === 'hang') {
      client.on('data', () => undefined);
      return;
    }
    relay(
      client,
      connect({ port: target.port, host: target.host, allowHalfOpen: true }),
      link,
      track,
    );
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;

  return {
    port,
    connections: links,
    setMode(next) {
      mode = next;
    },
    retarget(next) {
      target = next;
    },
    blackhole() {
      for (const link of links) link.blackholed = true;
    },
    reset() {
      for (const socket of sockets) socket.resetAndDestroy();
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function relay(client: Socket, upstream: Socket, link: Link, track: (socket: Socket) => void) {
  track(upstream);
  // Bytes are copied by hand rather than piped so a black-holed link can drop them while both
  // sockets stay open and keep acknowledging at the TCP level, as a silently dead path does.
  client.on('data', (chunk) => {
    if (!link.blackholed) upstream.write(chunk);
  });
  upstream.on('data', (chunk) => {
    if (!link.blackholed) client.write(chunk);
  });
  // While relaying, a FIN or a close on one side is passed on; once black-holed, nothing is.
  client.once('end', () => {
    if (!link.blackholed) upstream.end();
  });
  upstream.once('end', () => {
    if (!link.blackholed) client.end();
  });
  client.once('close', () => {
    if (!link.blackholed) upstream.destroy();
  });
  upstream.once('close', () => {
    if (!link.blackholed) client.destroy();
  });
}
