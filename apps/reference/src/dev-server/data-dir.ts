import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * What the embedded PostgreSQL's data directory says about who runs it: PostgreSQL's own
 * postmaster.pid, and the pid of the app that started the server (OWNER_FILE beside it).
 */

/** Next to PostgreSQL's own postmaster.pid: the pid of the app that started the server. */
export const OWNER_FILE = 'reference-app.pid';

/**
 * What postmaster.pid says about the data directory: nobody there, a server that is gone
 * (a crash, a reboot, a restarted container), or a live one.
 */
export type PostmasterState =
  | { state: 'none' }
  | { state: 'stale'; pid: number }
  | { state: 'running'; pid: number; port?: number };

export async function readPostmaster(dataDir: string): Promise<PostmasterState> {
  let text: string;
  try {
    text = await readFile(join(dataDir, 'postmaster.pid'), 'utf8');
  } catch (error) {
    if (errorCode(error) === 'ENOENT') return { state: 'none' };
    throw error;
  }
  const lines = text.split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0) return { state: 'stale', pid: 0 };
  if (!(await isAlive(pid)) || !(await runs(pid, 'postgres'))) return { state: 'stale', pid };
  return { state: 'running', pid, port: Number.isInteger(port) ? port : undefined };
}

export async function readOwner(dataDir: string): Promise<number | undefined> {
  const text = await readFile(join(dataDir, OWNER_FILE), 'utf8').catch(() => '');
  const pid = Number.parseInt(text, 10);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

export async function isAlive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return errorCode(error) === 'EPERM';
  }
  // A server that died after its app is an orphan; until init reaps it, it is a zombie.
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

/** Whether `pid` runs `command`, where /proc can tell; assumed so where it cannot. */
async function runs(pid: number, command: string): Promise<boolean> {
  try {
    return (await readFile(`/proc/${pid}/comm`, 'utf8')).trim() === command;
  } catch (error) {
    return errorCode(error) !== 'ENOENT' || !(await exists('/proc/self'));
  }
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

export function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('code' in error)) return undefined;
  return typeof error.code === 'string' ? error.code : undefined;
}
