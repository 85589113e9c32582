import { spawn } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';

const ROOT = resolve(__dirname, '../../..');
const WORKER_SOURCE = 'test/faults/worker.ts';
const LIBRARY = 'libs/outbox/src';

export interface CompiledWorker {
  /** The compiled worker script. */
  script: string;
  /** The tsconfig that maps `@app/outbox` into the compiled tree, for tsconfig-paths. */
  project: string;
  remove(): Promise<void>;
}

/**
 * Compiles the worker and what it imports (the library included) once per run, without type
 * checking (`npm run typecheck` does that), so each of the dozens of worker processes a run
 * starts boots from JavaScript: booting through ts-node took several seconds per process on a
 * busy 2-core machine. The output lives under node_modules so the compiled files still resolve
 * the project's packages.
 */
export async function compileWorker(
  options: {
    /** Puts the library's source somewhere under `outDir` and says where (its `src` folder). */
    library?: (outDir: string) => Promise<string>;
    /** Names the output folder, so two compilations of one run do not share it. */
    name?: string;
  } = {},
): Promise<CompiledWorker> {
  const outDir = join(
    ROOT,
    'node_modules',
    '.cache',
    'outbox-faults',
    `${options.name ?? 'run'}-${process.pid}`,
  );
  await rm(outDir, { recursive: true, force: true });
  await mkdir(outDir, { recursive: true });
  // The library the worker imports as `@app/outbox`: this tree's, or another copy of its source
  // under the root (the previous release's), compiled beside the worker.
  const library = relative(ROOT, (await options.library?.(outDir)) ?? join(ROOT, LIBRARY));
  const buildConfig = join(outDir, 'tsconfig.build.json');
  await writeFile(
    buildConfig,
    JSON.stringify({
      extends: join(ROOT, 'tsconfig.json'),
      compilerOptions: {
        outDir,
        rootDir: ROOT,
        noEmit: false,
        noCheck: true,
        declaration: false,
        sourceMap: false,
        incremental: false,
        typeRoots: [join(ROOT, 'node_modules', '@types')],
        types: ['node'],
        paths: { '@app/outbox': [library], '@app/outbox/*': [`${library}/*`] },
      },
      files: [join(ROOT, WORKER_SOURCE)],
      include: [],
    }),
  );
  const project = join(outDir, 'tsconfig.json');
  await writeFile(
    project,
    JSON.stringify({
      compilerOptions: {
        baseUrl: '.',
        paths: { '@app/outbox': [library], '@app/outbox/*': [`${library}/*`] },
      },
    }),
  );
  await new Promise<void>((done, fail) => {
    const tsc = spawn(
      process.execPath,
      [require.resolve('typescript/bin/tsc'), '-p', buildConfig],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    tsc.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    tsc.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    tsc.once('error', fail);
    tsc.once('exit', (code) =>
      code === 0 ? done() : fail(new Error(`compiling the fault worker failed:\n${output}`)),
    );
  });
  return {
    script: join(outDir, WORKER_SOURCE.replace(/\.ts$/, '.js')),
    project,
    remove: () => rm(outDir, { recursive: true, force: true }),
  };
}
