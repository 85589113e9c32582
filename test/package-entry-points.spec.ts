import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(__dirname, '..');
const SRC = join(ROOT, 'libs/outbox/src');

/** The add-ons and their packages, none of which the outbox itself may load. */
const ADD_ONS: Record<string, RegExp> = {
  'the bridges': /\/libs\/outbox\/src\/bridge\//,
  'the dashboard': /\/libs\/outbox\/src\/admin\/dashboard\//,
  'the command': /\/libs\/outbox\/src\/admin\/cli\//,
  amqplib: /\/node_modules\/amqplib\//,
  '@nats-io': /\/node_modules\/@nats-io\//,
  commander: /\/node_modules\/commander\//,
};

/**
 * The files a fresh Node.js process holds in `require.cache` after requiring `entry` (a path
 * under the library's source): compiled on the fly, as the package's CommonJS build loads them.
 */
function loadedBy(entry: string): string[] {
  const script = `require(${JSON.stringify(join(SRC, entry))});
    process.stdout.write(JSON.stringify(Object.keys(require.cache)));`;
  const output = execFileSync(
    process.execPath,
    ['-r', 'ts-node/register/transpile-only', '-r', 'tsconfig-paths/register', '-e', script],
    { cwd: ROOT, encoding: 'utf8', timeout: 60_000 },
  );
  return JSON.parse(output) as string[];
}

describe('entry points', () => {
  let root: string[];
  beforeAll(() => {
    root = loadedBy('index.ts');
  }, 90_000);

  it.each(Object.entries(ADD_ONS))('the root entry loads none of %s', (_addOn, files) => {
    expect(root.filter((file) => files.test(file))).toEqual([]);
  });

  it('loads the outbox itself: its module, engine and store', () => {
    for (const part of [
      'outbox.module.ts',
      'engine/outbox.engine.ts',
      'store/lease/lease.store.ts',
    ])
      expect(root).toContain(join(SRC, part));
  });

  it.each([
    ['bridge/index.ts', ['the bridges']],
    ['admin/index.ts', ['the dashboard', 'the command', 'commander']],
  ])(
    '%s loads its add-on, and no broker client until a transport is made',
    (entry, addOns) => {
      const loaded = loadedBy(entry);
      for (const addOn of addOns)
        expect(loaded.some((file) => ADD_ONS[addOn].test(file))).toBe(true);
      for (const client of ['amqplib', '@nats-io'])
        expect(loaded.filter((file) => ADD_ONS[client].test(file))).toEqual([]);
    },
    90_000,
  );
});
