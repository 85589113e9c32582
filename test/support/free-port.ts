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
