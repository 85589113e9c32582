import { execFile } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import { compileWorker, type CompiledWorker } from './compile';
import type { MigrationList } from './database';

const ROOT = resolve(__dirname, '../../..');

/**
 * The release before this code, run beside it by `mixed-versions`: its library as tagged, taken
 * by commit so that a clone without tags has it too.
 */
export const PREVIOUS_RELEASE = {
  version: '0.2.0',
  tag: 'v0.2.0',
  commit: 'aea43dc01bb5b5d323bb59d5f46f98658e044c8e',
} as const;

/**
 * The fault worker compiled against the previous release's library: its source taken from git
 * (`git archive`), compiled with the worker as this tree's library is (see `compileWorker`). The
 * source goes under `.tmp/` rather than node_modules, whose files the compiler would take for a
 * package's and not emit.
 */
export interface PreviousRelease extends CompiledWorker {
  /** The release's own migrations, compiled: its schema. */
  migrations: MigrationList;
}

export async function compilePreviousReleaseWorker(): Promise<PreviousRelease> {
  const source = join(ROOT, '.tmp', `faults-release-${PREVIOUS_RELEASE.version}-${process.pid}`);
  const compiled = await compileWorker({
    name: `release-${PREVIOUS_RELEASE.version}`,
    library: async () => {
      await rm(source, { recursive: true, force: true });
      await mkdir(source, { recursive: true });
      const archive = join(source, 'library.tar');
      const run = promisify(execFile);
      await run('git', ['archive', '-o', archive, PREVIOUS_RELEASE.commit, 'libs/outbox/src'], {
        cwd: ROOT,
      });
      await run('tar', ['-xf', archive, '-C', source]);
      await rm(archive);
      return join(source, 'libs/outbox/src');
    },
  });
  // Compiled where the source sat relative to the root, under the output folder.
  const library = join(dirname(compiled.project), relative(ROOT, source), 'libs/outbox/src');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { OUTBOX_MIGRATIONS } = require(join(library, 'migrations')) as {
    OUTBOX_MIGRATIONS: MigrationList;
  };
  return {
    ...compiled,
    migrations: OUTBOX_MIGRATIONS,
    remove: async () => {
      await compiled.remove();
      await rm(source, { recursive: true, force: true });
    },
  };
}
