import { createServer } from 'node:net';

/**
 * A TCP port on 127.0.0.1 that nothing listened on a moment ago. The kernel picks it, so
 * parallel runs on one machine do not fight over a fixed 5432; the small window between closing
 * this probe and the server binding the port is an accepted race.
 */
export function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.unref();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      probe.close(() => (port > 0 ? resolve(port) : reject(new Error('no port was assigned'))));
    });
  });
}

/**
 * `count` distinct free ports: every probe is held open until all are assigned, so the kernel
 * cannot hand the same port out twice (one just closed can come back at once).
 */
export async function findFreePorts(count: number): Promise<number[]> {
  const probes = Array.from({ length: count }, () => createServer());
  try {
    return await Promise.all(
      probes.map(
        (probe) =>
          new Promise<number>((resolve, reject) => {
            probe.unref();
            probe.once('error', reject);
            probe.listen(0, '127.0.0.1', () => {
              const address = probe.address();
              const port = typeof address === 'object' && address !== null ? address.port : 0;
              if (port > 0) resolve(port);
              else reject(new Error('no port was assigned'));
            });
          }),
      ),
    );
  } finally {
    await Promise.all(
      probes.map((probe) => new Promise<void>((resolve) => probe.close(() => resolve()))),
    );
  }
}
