import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { BREAK_MODES, isBreakMode } from './support/breaks';
import { producerConfig, workerConfig, type ProducerOptions } from './support/children';
import { compileWorker, type CompiledWorker } from './support/compile';
import { compilePreviousReleaseWorker, PREVIOUS_RELEASE } from './support/previous-release';
import { createFaultDatabase, createFaultTemplate } from './support/database';
import { startPgServer, type PgServer } from './support/pg-server';
import { describeExit, FaultChild, killAllChildrenSync } from './support/processes';
import { passed, printScenario, printSummary, type ScenarioRun } from './support/report';
import {
  Outcome,
  type Scenario,
  type ScenarioContext,
  type WorkerOptions,
} from './support/scenario';
import { SCENARIOS } from './scenarios';

/**
 * The process-level fault suite: a PostgreSQL server of its own, worker and producer processes
 * running the real OutboxModule, and faults (kills, restarts, terminated backends, half-open
 * sockets, locks, a silent database) applied while events flow. Each scenario prints its
 * figures and asserts on counts; the exit code is non-zero when any failed.
 *
 *   npm run test:faults -- [--quick] [--only <name>[,<name>...]] [--break <mode>]
 *
 * --quick runs fewer events and iterations (the CI version); --only picks scenarios by name;
 * --break installs one of the deliberate faults of support/breaks.ts, to see the suite catch it.
 */

interface Args {
  quick: boolean;
  only: string[];
  breakMode: string | undefined;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { quick: false, only: [], breakMode: undefined };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--quick') args.quick = true;
    else if (arg === '--only') args.only.push(...(argv[++i] ?? '').split(','));
    else if (arg === '--break') args.breakMode = argv[++i];
    else throw new Error(`unknown argument ${arg}`);
  }
  const names = SCENARIOS.map((s) => s.name);
  for (const name of args.only) {
    if (!names.includes(name))
      throw new Error(`no scenario '${name}'; one of: ${names.join(', ')}`);
  }
  if (args.breakMode !== undefined && !isBreakMode(args.breakMode)) {
    throw new Error(
      `no break mode '${args.breakMode}'; one of: ${Object.keys(BREAK_MODES).join(', ')}`,
    );
  }
  return args;
}

/** A scenario that runs longer than this has hung; it fails and its processes are killed. */
const SCENARIO_TIMEOUT_MS = { quick: 180_000, full: 420_000 };

let server: PgServer | undefined;
let compiled: CompiledWorker | undefined;

// Whatever ends the run, no worker and no server outlives it.
process.on('exit', () => {
  killAllChildrenSync();
  server?.destroySync();
  if (compiled) rmSync(join(compiled.project, '..'), { recursive: true, force: true });
});
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    process.stderr.write(`\nfault suite: ${signal}, cleaning up\n`);
    process.exit(130);
  });
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const startedAt = Date.now();
  // Both before either failure is thrown, so the exit handler knows what to clean up.
  const [started, built] = await Promise.allSettled([
    startPgServer().then((s) => (server = s)),
    compileWorker().then((c) => (compiled = c)),
  ]);
  if (started.status === 'rejected') throw started.reason;
  if (built.status === 'rejected') throw built.reason;
  server = started.value;
  compiled = built.value;
  await createFaultTemplate(server);
  process.stdout.write(
    `fault suite${args.quick ? ' (quick)' : ''}: PostgreSQL ${server.version} on 127.0.0.1:${server.port} from ${server.bin}` +
      `${args.breakMode ? `; deliberately broken: ${BREAK_MODES[args.breakMode as keyof typeof BREAK_MODES]}` : ''}\n`,
  );

  const runs: ScenarioRun[] = [];
  for (const [index, scenario] of SCENARIOS.entries()) {
    if (args.only.length > 0 && !args.only.includes(scenario.name)) continue;
    const run = await runScenario(server, compiled, scenario, index + 1, args);
    printScenario(run);
    runs.push(run);
  }
  printSummary(runs);
  process.stdout.write(`total ${((Date.now() - startedAt) / 1000).toFixed(1)} s\n`);
  return runs.every(passed) ? 0 : 1;
}

async function runScenario(
  pg: PgServer,
  worker: CompiledWorker,
  scenario: Scenario,
  index: number,
  args: Args,
): Promise<ScenarioRun> {
  process.stdout.write(`\n== ${index} ${scenario.name}: ${scenario.title}\n`);
  const startedAt = Date.now();
  const outcome = new Outcome();
  const children: FaultChild[] = [];
  // Compiled only for a scenario that runs it, and its schema is where the database starts.
  const previous = scenario.previousRelease ? await compilePreviousReleaseWorker() : undefined;
  const db = await createFaultDatabase(
    pg,
    `faults_${index}_${scenario.name.replaceAll('-', '_')}`,
    { migrations: previous?.migrations },
  );
  const spawnerOf = (compiled: CompiledWorker) => {
    const spawnWorker: ScenarioContext['spawnWorker'] = (label, options = {}) => {
      const child = FaultChild.spawn(
        compiled,
        label,
        workerConfig(db.url, options, args.breakMode),
      );
      children.push(child);
      return child;
    };
    return {
      spawnWorker,
      async worker(label: string, options?: WorkerOptions) {
        const child = spawnWorker(label, options);
        await child.ready();
        return child;
      },
      async producer(options?: ProducerOptions) {
        const label = options?.label ?? 'producer';
        const child = FaultChild.spawn(compiled, label, producerConfig(db.url, options));
        children.push(child);
        await child.ready();
        return child;
      },
    };
  };
  const ctx: ScenarioContext = {
    server: pg,
    db,
    quick: args.quick,
    breakMode: args.breakMode,
    ...spawnerOf(worker),
    previous: previous && { version: PREVIOUS_RELEASE.version, ...spawnerOf(previous) },
    note: (text) =>
      process.stdout.write(
        `  [${((Date.now() - startedAt) / 1000).toFixed(1).padStart(5)} s] ${text}\n`,
      ),
  };
  let error: string | undefined;
  let timer: NodeJS.Timeout | undefined;
  const limitMs = args.quick ? SCENARIO_TIMEOUT_MS.quick : SCENARIO_TIMEOUT_MS.full;
  try {
    await Promise.race([
      scenario.run(ctx, outcome),
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`scenario still running after ${limitMs} ms`)),
          limitMs,
        );
      }),
    ]);
  } catch (caught) {
    error = caught instanceof Error ? (caught.stack ?? caught.message) : String(caught);
  } finally {
    clearTimeout(timer);
    // A scenario that failed midway may leave the server suspended or children running.
    pg.resume();
    await Promise.all(children.map((child) => child.stop(5000)));
    error = explain(error, children);
    await db.close().catch(() => undefined);
    await previous?.remove();
  }
  return { index, scenario, outcome, error, durationMs: Date.now() - startedAt };
}

/**
 * The scenario's own error, if any, and the output of every child that exited on its own (once
 * per distinct last line, they tend to repeat); other children's output only when the scenario
 * itself failed to finish, since that is when it is needed.
 */
function explain(error: string | undefined, children: FaultChild[]): string | undefined {
  const notes: string[] = error ? [error] : [];
  const seen = new Set<string>();
  for (const child of children.filter((c) => c.crashed)) {
    const tail = child.tail(25);
    const key = tail.split('\n').find((line) => /error/i.test(line)) ?? tail;
    const exit = describeExit(child.exit!);
    if (seen.has(key)) {
      notes.push(`${child.label} (pid ${child.pid}) exited on its own (${exit}), same output`);
      continue;
    }
    seen.add(key);
    notes.push(
      `${child.label} (pid ${child.pid}) exited on its own (${exit}); its output ended with:\n${tail}`,
    );
  }
  if (error) {
    for (const child of children.filter((c) => !c.crashed && c.count(/./) > 0)) {
      notes.push(`--- ${child.label} (pid ${child.pid}) output tail:\n${child.tail(15)}`);
    }
  }
  return notes.length > 0 ? notes.join('\n') : undefined;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `fault suite could not run: ${error instanceof Error ? error.stack : String(error)}\n`,
    );
    process.exit(1);
  },
);
