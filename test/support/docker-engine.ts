import { existsSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { homedir, userInfo } from 'node:os';
import { join } from 'node:path';

/** Long enough for a loaded local daemon to answer, short enough to keep `npm test` snappy. */
const PING_TIMEOUT_MS = 1_000;

type Endpoint = { socketPath: string } | { host: string; port: number };

/**
 * Whether a Docker engine answers where testcontainers would look for one. This is one
 * `GET /_ping`: loading testcontainers and asking its runtime client costs far more (and on
 * Node < 22.22 testcontainers 12 cannot even load), so that path runs only when there is an
 * engine to find. A bare TCP connect is not proof: sandboxes and proxies accept connections
 * on any address. Endpoints are tried in testcontainers' own order.
 */
export async function dockerEngineAnswers(): Promise<boolean> {
  for (const endpoint of candidateEndpoints()) {
    if (await pings(endpoint)) {
      return true;
    }
  }
  return false;
}

function candidateEndpoints(): Endpoint[] {
  const configured = process.env.DOCKER_HOST ?? propertiesDockerHost();
  if (configured) {
    // An explicit DOCKER_HOST is authoritative for testcontainers too: probing the default
    // sockets as well would report an engine testcontainers will not use.
    const endpoint = parseDockerHost(configured);
    return endpoint ? [endpoint] : [];
  }
  const home = homedir();
  const sockets = [
    '/var/run/docker.sock',
    process.env.XDG_RUNTIME_DIR ? join(process.env.XDG_RUNTIME_DIR, 'docker.sock') : undefined,
    join(home, '.docker', 'run', 'docker.sock'),
    join(home, '.docker', 'desktop', 'docker.sock'),
    `/run/user/${userInfo().uid}/docker.sock`,
  ];
  return sockets
    .filter((path): path is string => path !== undefined && existsSync(path))
    .map((socketPath) => ({ socketPath }));
}

/** `docker.host` from ~/.testcontainers.properties, which testcontainers honours like DOCKER_HOST. */
function propertiesDockerHost(): string | undefined {
  const file = join(homedir(), '.testcontainers.properties');
  if (!existsSync(file)) {
    return undefined;
  }
  const line = readFileSync(file, 'utf8')
    .split(/\r?\n/)
    .find((entry) => entry.trim().startsWith('docker.host='));
  return line?.split('=').slice(1).join('=').trim() || undefined;
}

function parseDockerHost(value: string): Endpoint | undefined {
  if (value.startsWith('unix://')) {
    return { socketPath: value.slice('unix://'.length) };
  }
  // A TLS-protected daemon would need its client certificates just to answer a ping; such
  // setups can pass DATABASE_URL instead.
  if (value.startsWith('tcp://') && !process.env.DOCKER_TLS_VERIFY) {
    const url = new URL(value.replace(/^tcp:/, 'http:'));
    return { host: url.hostname, port: Number(url.port || 2375) };
  }
  // ssh:// and npipe:// cannot be pinged cheaply either; report no engine rather than guess.
  return undefined;
}

function pings(endpoint: Endpoint): Promise<boolean> {
  return new Promise((resolve) => {
    const ping = request({ ...endpoint, method: 'GET', path: '/_ping', timeout: PING_TIMEOUT_MS });
    ping.once('response', (response) => {
      response.resume();
      resolve(response.statusCode === 200);
    });
    ping.once('timeout', () => ping.destroy());
    ping.once('error', () => resolve(false));
    ping.end();
  });
}
