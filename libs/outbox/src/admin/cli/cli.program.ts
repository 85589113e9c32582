import { userInfo } from 'node:os';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { MigrationExecutor } from 'typeorm';
import type {
  BlockedKeysFilter,
  DeadLetterFilter,
  DeadLetterSelector,
} from '../../store/admin/dead-letter.types';
import {
  InvalidOutboxAdminQueryError,
  OutboxAdminChangeInProgressError,
  OutboxStoreError,
} from '../../outbox.errors';
import { scrubError } from '../../common/scrub-error.util';
import { withConnection, type Connection } from './cli.connection';
import { EXIT, type ExitCode } from './exit-codes.constants';
import { terminalJson, terminalText } from './cli.output';
import {
  renderBlockedKeys,
  renderChange,
  renderGroups,
  renderList,
  renderPartitions,
  renderStatus,
} from './cli.render';

/** Where the CLI writes and what it reads: the process's, or a test's. */
export interface CliIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  env: Record<string, string | undefined>;
}

interface GlobalOptions {
  url?: string;
  json?: boolean;
  statementTimeoutMs: number;
}

interface FilterOptions {
  type: string[];
  handler?: string;
  org?: string;
  aggregateType?: string;
  aggregateId?: string;
  error?: string;
  deadAfter?: Date;
  deadBefore?: Date;
  includeRetrying?: boolean;
  includeDiscarded?: boolean;
}

/** A usage error found after parsing (commander's own are CommanderErrors). */
class UsageError extends Error {}

/**
 * Runs one command line (without the node and script arguments) and returns the exit status;
 * never calls `process.exit`, so it can run inside a test.
 */
export async function runCli(argv: readonly string[], given: CliIo): Promise<ExitCode> {
  // Everything but `--json` documents goes through `terminalText`, errors and help included.
  const io: CliIo = {
    env: given.env,
    stdout: { write: (text: string) => given.stdout.write(terminalText(text)) },
    stderr: { write: (text: string) => given.stderr.write(terminalText(text)) },
  };
  let status: ExitCode = EXIT.ok;
  const program = buildProgram(io, given.stdout, (code) => {
    status = code;
  });
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return status;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version end through here too, with exit code 0.
      return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (error instanceof UsageError || error instanceof InvalidOutboxAdminQueryError) {
      io.stderr.write(`error: ${error.message}\n`);
      return EXIT.usage;
    }
    if (error instanceof OutboxAdminChangeInProgressError) {
      io.stderr.write(`error: ${error.message}\n`);
      return EXIT.changeInProgress;
    }
    // The store error is scrubbed already; anything else (a refused connection) is scrubbed
    // here, so no password or payload reaches the terminal or a CI log.
    const message = error instanceof OutboxStoreError ? error.message : scrubError(error);
    io.stderr.write(`error: ${message}\n`);
    return EXIT.failure;
  }
}

function buildProgram(
  io: CliIo,
  jsonOut: CliIo['stdout'],
  exit: (code: ExitCode) => void,
): Command {
  const program = new Command('nestjs-lease-outbox')
    .description('Operate a transactional outbox: its state, its dead letters, its migrations.')
    .option('--url <url>', 'PostgreSQL connection string (default: $DATABASE_URL)')
    .option('--json', 'print JSON instead of text')
    .addOption(
      new Option('--statement-timeout-ms <ms>', 'bound on each statement')
        .argParser(positiveInteger)
        .default(15_000),
    )
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
    })
    .showHelpAfterError('(run with --help for usage)');

  const print = (cmd: Command, value: unknown, text: (value: never) => string) => {
    const json = globals(cmd).json;
    if (json) jsonOut.write(terminalJson(`${JSON.stringify(value, null, 2)}\n`));
    else io.stdout.write(text(value as never));
  };
  const connect = <T>(cmd: Command, work: (c: Connection) => Promise<T>, table?: string) => {
    const options = globals(cmd);
    const url = options.url ?? io.env.DATABASE_URL;
    if (!url) throw new UsageError('no database: pass --url or set DATABASE_URL');
    return withConnection(
      { url, statementTimeoutMs: options.statementTimeoutMs, migrationsTableName: table },
      work,
    );
  };

  program
    .command('status')
    .description(
      'counts by state and by type, the lag and the next due time (exact: reads every undelivered row)',
    )
    .option('--fail-on-dead', `exit with ${EXIT.deadLetters} when dead letters exist`)
    .action(async (options: { failOnDead?: boolean }, cmd: Command) => {
      const status = await connect(cmd, ({ admin }) => admin.status());
      print(cmd, status, renderStatus);
      if (options.failOnDead && status.dead > 0) exit(EXIT.deadLetters);
    });

  program
    .command('partitions')
    .description(
      'who floods: the partitions with the most due first tries, and with the oldest (fair claims)',
    )
    .addOption(
      new Option('--top <n>', 'partitions in each list, 1 to 100').argParser(positiveInteger),
    )
    .action(async (options: { top?: number }, cmd: Command) => {
      const top = await connect(cmd, ({ admin }) => admin.partitions(options.top));
      print(cmd, top, renderPartitions);
    });

  const dead = program
    .command('dead')
    .description('dead letters: list, group, blocked keys, show, replay, discard');

  withFilter(
    dead
      .command('list')
      .description('dead events, newest first')
      .addOption(new Option('--limit <n>', 'events per page, 1 to 500').argParser(positiveInteger))
      .option('--after <cursor>', 'the page after this cursor (printed as "more:")'),
  ).action(async (options: FilterOptions & { limit?: number; after?: string }, cmd: Command) => {
    const list = await connect(cmd, ({ admin }) =>
      admin.list(toFilter(options), { limit: options.limit, after: options.after }),
    );
    print(cmd, list, renderList);
  });

  withFilter(
    dead
      .command('groups')
      .description('dead events by type, failed handler and error, largest first'),
  ).action(async (options: FilterOptions, cmd: Command) => {
    const groups = await connect(cmd, ({ admin }) => admin.groups(toFilter(options)));
    print(cmd, groups, renderGroups);
  });

  dead
    .command('blocked')
    .description(
      'keys an ordered handler cannot go on with: their head event is dead, oldest first',
    )
    .option('--handler <name>', 'keys blocked for this ordered handler')
    .option('--key <key>', 'this key only')
    .addOption(new Option('--limit <n>', 'keys per page, 1 to 500').argParser(positiveInteger))
    .option('--after <cursor>', 'the page after this cursor (printed as "more:")')
    .action(async (options: BlockedKeysFilter, cmd: Command) => {
      const list = await connect(cmd, ({ admin }) => admin.blockedKeys(options));
      print(cmd, list, renderBlockedKeys);
    });

  dead
    .command('show')
    .description('one event whole: payload, deliveries, failures, times')
    .argument('<id>', 'event id')
    .action(async (id: string, _options: unknown, cmd: Command) => {
      const event = await connect(cmd, ({ admin }) => admin.show(id));
      if (!event) {
        io.stderr.write(`error: no outbox event ${id}\n`);
        return exit(EXIT.notFound);
      }
      // Always a JSON document (what was asked for is the payload itself).
      jsonOut.write(terminalJson(`${JSON.stringify(event, null, 2)}\n`));
    });

  withChange(
    withFilter(
      dead
        .command('replay')
        .description('make dead events due now: the ids given, or those the filter selects')
        .argument('[ids...]', 'event ids')
        .option('--rerun <handler>', 'only this handler runs again (repeatable)', collect, []),
    ),
  ).action(async (ids: string[], options: ChangeOptions & { rerun: string[] }, cmd: Command) => {
    if (options.handler !== undefined && options.rerun.length === 0) {
      // The two read alike and do different things; say which one was asked for.
      io.stderr.write(
        `note: --handler ${options.handler} selects the events it failed; every handler that has ` +
          `not delivered them runs again. To run only it again, add --rerun ${options.handler}.\n`,
      );
    }
    const change = await connect(cmd, ({ admin }) =>
      admin.replay(toSelector(ids, options), {
        rerun: options.rerun.length > 0 ? options.rerun : undefined,
        dryRun: options.dryRun,
        actor: options.actor,
        ...toBounds(options),
      }),
    );
    print(cmd, change, (c) => renderChange('replay', c));
  });

  withChange(
    withFilter(
      dead
        .command('discard')
        .description('set events aside for good, with a reason: never replayed, swept later')
        .argument('[ids...]', 'event ids')
        .requiredOption('--reason <text>', 'why, kept on each event'),
    ),
  ).action(async (ids: string[], options: ChangeOptions & { reason: string }, cmd: Command) => {
    const change = await connect(cmd, ({ admin }) =>
      admin.discard(toSelector(ids, options), {
        reason: options.reason,
        dryRun: options.dryRun,
        actor: options.actor,
        ...toBounds(options),
      }),
    );
    print(cmd, change, (c) => renderChange('discard', c));
  });

  program
    .command('migrate')
    .description(
      "apply the outbox's migrations, each in its own transaction but for index builds, which run concurrently",
    )
    .option('--dry-run', 'list the migrations that would run, run none')
    .option('--migrations-table <name>', "TypeORM's migrations table", 'migrations')
    .action(async (options: { dryRun?: boolean; migrationsTable: string }, cmd: Command) => {
      const names = await connect(
        cmd,
        async ({ dataSource }) => {
          if (options.dryRun) {
            const pending = await new MigrationExecutor(dataSource).getPendingMigrations();
            return pending.map((m) => m.name);
          }
          const applied = await dataSource.runMigrations({ transaction: 'each' });
          return applied.map((m) => m.name);
        },
        options.migrationsTable,
      );
      const verb = options.dryRun ? 'would apply' : 'applied';
      print(cmd, { dryRun: options.dryRun ?? false, migrations: names }, () =>
        names.length === 0
          ? 'up to date: no migration to apply\n'
          : names.map((name) => `${verb} ${name}\n`).join(''),
      );
    });

  return program;
}

type ChangeOptions = FilterOptions & {
  all?: boolean;
  dryRun?: boolean;
  actor?: string;
  maxRows?: number;
  timeBudgetMs?: number;
  after?: string;
};

function withFilter(command: Command): Command {
  return command
    .option('--type <type>', 'event type (repeatable, or comma-separated)', collect, [])
    .option('--handler <name>', 'a handler that failed the event and has not delivered it')
    .option('--org <id>', 'organization id')
    .option('--aggregate-type <type>', 'aggregate type')
    .option('--aggregate-id <id>', 'aggregate id')
    .option('--error <text>', 'text in the last error (case-insensitive)')
    .addOption(new Option('--dead-after <time>', 'dead at or after (ISO time)').argParser(isoTime))
    .addOption(new Option('--dead-before <time>', 'dead before (ISO time)').argParser(isoTime))
    .option('--include-retrying', 'also events retrying after a failure')
    .option('--include-discarded', 'also discarded events');
}

function withChange(command: Command): Command {
  return command
    .option('--all', 'with no filter: every dead letter (refused otherwise)')
    .option('--dry-run', 'report what would change, change nothing')
    .option('--actor <name>', 'who asks, recorded with the change', defaultActor())
    .addOption(
      new Option(
        '--max-rows <n>',
        'with a filter: change at most n events (default 10000)',
      ).argParser(positiveInteger),
    )
    .addOption(
      new Option(
        '--time-budget-ms <ms>',
        'with a filter: start no batch after this long (default 10000)',
      ).argParser(positiveInteger),
    )
    .option('--after <cursor>', 'with a filter: go on after this cursor (printed as "--after")');
}

/** The bounds given on the command line; OutboxAdmin refuses them with ids. */
function toBounds(options: ChangeOptions) {
  return { maxRows: options.maxRows, timeBudgetMs: options.timeBudgetMs, after: options.after };
}

function toFilter(options: FilterOptions): DeadLetterFilter {
  const types = options.type.flatMap((t) => t.split(',')).map((t) => t.trim());
  return {
    types: types.length > 0 ? types : undefined,
    handler: options.handler,
    organizationId: options.org,
    aggregateType: options.aggregateType,
    aggregateId: options.aggregateId,
    errorContains: options.error,
    deadAfter: options.deadAfter,
    deadBefore: options.deadBefore,
    includeRetrying: options.includeRetrying,
    includeDiscarded: options.includeDiscarded,
  };
}

function toSelector(ids: string[], options: ChangeOptions): DeadLetterSelector {
  const filter = toFilter(options);
  const filtered = Object.values(filter).some((value) => value !== undefined);
  if (ids.length > 0) {
    if (filtered || options.all) {
      throw new UsageError('give event ids or filter options (or --all), not both');
    }
    return { ids };
  }
  if (!filtered && !options.all) {
    throw new UsageError('give event ids, filter options, or --all for every dead letter');
  }
  return { filter, all: options.all };
}

function globals(cmd: Command): GlobalOptions {
  return cmd.optsWithGlobals<GlobalOptions>();
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function positiveInteger(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < 1) {
    throw new InvalidArgumentError('expected a positive integer.');
  }
  return n;
}

function isoTime(value: string): Date {
  const at = new Date(value);
  if (!/^\d{4}-\d\d-\d\d/.test(value) || Number.isNaN(at.getTime())) {
    throw new InvalidArgumentError('expected an ISO time such as 2026-12-01T09:00:00Z.');
  }
  return at;
}

/** `cli:<login>`, or `cli` where the process has no user name (a container without passwd). */
function defaultActor(): string {
  try {
    return `cli:${userInfo().username}`;
  } catch {
    return 'cli';
  }
}
