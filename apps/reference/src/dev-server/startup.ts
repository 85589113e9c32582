import { createServer } from 'node:net';
import { isAbsolute, relative } from 'node:path';
import { scrubError } from '@app/outbox';

/** A start-up problem the user can fix; its message says what is wrong and what to do. */
export class StartupError extends Error {
  override name = 'StartupError';
}

/**
 * Fails with a message naming the port and the variable that moves it when something already
 * listens on 127.0.0.1:`port`. The probe closes before the real server binds, so a race is
 * still possible; the listen error is translated the same way (see describeStartupError).
 */
export async function assertPortFree(port: number, what: string, variable: string): Promise<void> {
  if (port === 0) return; // the kernel picks a free one
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.unref();
    probe.once('error', reject);
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve()));
  }).catch((error: unknown) => {
    throw portError(error, port, what, variable) ?? error;
  });
}

/** The StartupError for a failed bind of `port`, or undefined when `error` is something else. */
export function portError(
  error: unknown,
  port: number,
  what: string,
  variable: string,
): StartupError | undefined {
  const code = errorCode(error);
  if (code === 'EADDRINUSE') {
    return new StartupError(
      `port ${port} on 127.0.0.1 is already in use (wanted by ${what}); ` +
        `set ${variable}=<a free port>, or stop what listens there`,
    );
  }
  if (code === 'EACCES') {
    return new StartupError(
      `port ${port} on 127.0.0.1 (wanted by ${what}) needs privileges this process lacks; ` +
        `set ${variable}=<a port above 1023>`,
    );
  }
  return undefined;
}

/**
 * One line for the log: a StartupError's message as is; anything else with its name and code,
 * credentials scrubbed (connection URLs carry a password). Never a bare "undefined": some
 * libraries reject with no reason at all.
 */
export function describeStartupError(error: unknown): string {
  if (error instanceof StartupError) return error.message;
  if (error === undefined || error === null) {
    return `start-up failed without a reason (something rejected with ${String(error)})`;
  }
  return scrubError(error);
}

/** `path` relative to the working directory when it lies inside it, as users typed it. */
export function displayPath(path: string): string {
  const inside = relative(process.cwd(), path);
  return inside && !inside.startsWith('..') && !isAbsolute(inside) ? inside : path;
}

function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('code' in error)) return undefined;
  return typeof error.code === 'string' ? error.code : undefined;
}
