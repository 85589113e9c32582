import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { DataSource, type DataSourceOptions, type MigrationInterface } from 'typeorm';
import {
  InvalidOutboxMigrationsOptionsError,
  OUTBOX_MIGRATIONS,
  OutboxDiscardIndexes1768500000000,
  OutboxOrderingIndexes1773500000000,
  outboxMigrations,
} from '@app/outbox';
import { OUTBOX_CLI_EXIT, runOutboxCli } from '@app/outbox/admin';
import { dropDatabase, withAdminClient } from './support/admin-client';
import { withDatabase } from './support/database-url';
import { emitsGoOnDuring } from './support/index-build-probe';
import { migratedIndexes } from './support/schema-catalog';
import { ADMIN_URL_ENV, TEMPLATE_ENV, requireRunEnv } from './support/test-run';

/**
 * The outbox's migrations run under each of TypeORM's transaction modes ('all', its default,
 * 'each' and 'none') and through each way an app runs them: `runMigrations()`, `migrationsRun:
 * true` at initialize, the TypeORM CLI, and the package's `nestjs-lease-outbox migrate`. Inside
 * a transaction an index is built plainly; outside one, concurrently, so emits go on meanwhile.
 */

const ROOT = join(__dirname, '..');
type Mode = 'all' | 'each' | 'none';

/** What a run of every outbox migration leaves: the template's indexes, all valid. */
let expectedIndexes: Record<string, string>;

const databases: string[] = [];

async function freshDatabase(): Promise<string> {
  const adminUrl = requireRunEnv(ADMIN_URL_ENV);
  const name = `${requireRunEnv(TEMPLATE_ENV)}_modes_${randomBytes(4).toString('hex')}`;
  await withAdminClient(adminUrl, (client) =>
    client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`),
  );
  databases.push(name);
  return withDatabase(adminUrl, name);
}

async function withDataSource<T>(
  url: string,
  options: Partial<DataSourceOptions>,
  work: (dataSource: DataSource) => Promise<T>,
): Promise<T> {
  const dataSource = new DataSource({
    type: 'postgres',
    url,
    migrations: OUTBOX_MIGRATIONS,
    logging: false,
    ...options,
  } as DataSourceOptions);
  await dataSource.initialize();
  try {
    return await work(dataSource);
  } finally {
    await dataSource.destroy();
  }
}

/** Reverts the last migration (it builds the ordering indexes) in a transaction. */
/** Reverts the migrations from the last index-only one (`OutboxOrderingIndexes1773500000000`) on. */
async function undoFromLastIndexBuild(url: string): Promise<void> {
  const since =
    OUTBOX_MIGRATIONS.length - OUTBOX_MIGRATIONS.indexOf(OutboxOrderingIndexes1773500000000);
  await withDataSource(url, {}, async (dataSource) => {
    for (let i = 0; i < since; i++) await dataSource.undoLastMigration();
  });
}

function runProcess(args: string[], url: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      args,
      {
        cwd: ROOT,
        env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: url },
        timeout: 50_000,
      },
      (error, stdout, stderr) =>
        error ? reject(new Error(`${error.message}\n${stdout}\n${stderr}`)) : resolve(),
    );
  });
}

const sink = (): Writable & { text: string } => {
  const out = new Writable({
    write(chunk: Buffer, _encoding, done) {
      out.text += chunk.toString();
      done();
    },
  }) as Writable & { text: string };
  out.text = '';
  return out;
};

interface EntryPoint {
  name: string;
  /** Runs the pending outbox migrations on the database at `url`. */
  run(url: string): Promise<unknown>;
  /** Whether its index builds run outside a transaction (concurrently). */
  concurrent: boolean;
}

const ENTRY_POINTS: EntryPoint[] = [
  ...(['all', 'each', 'none'] as const).map((mode: Mode): EntryPoint => ({
    name: `runMigrations({ transaction: '${mode}' })`,
    run: (url) =>
      withDataSource(url, {}, (dataSource) => dataSource.runMigrations({ transaction: mode })),
    concurrent: mode === 'none',
  })),
  {
    name: 'runMigrations() with every default',
    run: (url) => withDataSource(url, {}, (dataSource) => dataSource.runMigrations()),
    concurrent: false,
  },
  {
    name: 'migrationsRun: true with every default',
    run: (url) => withDataSource(url, { migrationsRun: true }, () => Promise.resolve()),
    concurrent: false,
  },
  ...(['each', 'none'] as const).map((mode: Mode): EntryPoint => ({
    name: `migrationsRun: true, migrationsTransactionMode: '${mode}'`,
    run: (url) =>
      withDataSource(url, { migrationsRun: true, migrationsTransactionMode: mode }, () =>
        Promise.resolve(),
      ),
    concurrent: mode === 'none',
  })),
  ...([undefined, 'each', 'none'] as const).map((mode): EntryPoint => ({
    name: `typeorm migration:run${mode ? ` -t ${mode}` : ''} (the data source's default mode)`,
    run: (url) =>
      runProcess(
        [
          '-r',
          'ts-node/register/transpile-only',
          require.resolve('typeorm/cli.js'),
          'migration:run',
          '-d',
          'test/support/migrations-cli-data-source.ts',
          ...(mode ? ['-t', mode] : []),
        ],
        url,
      ),
    concurrent: mode === 'none',
  })),
  ...(['each', 'none'] as const).map((mode: Mode): EntryPoint => ({
    name: `outboxMigrations({ concurrentIndexes: true }), migrationsTransactionMode: '${mode}'`,
    run: (url) =>
      withDataSource(
        url,
        {
          migrations: outboxMigrations({ concurrentIndexes: true }),
          migrationsRun: true,
          migrationsTransactionMode: mode,
        },
        () => Promise.resolve(),
      ),
    concurrent: true,
  })),
  {
    name: 'nestjs-lease-outbox migrate',
    run: async (url) => {
      const stderr = sink();
      const status = await runOutboxCli(['migrate', '--url', url], {
        stdout: sink(),
        stderr,
        env: {},
      });
      if (status !== OUTBOX_CLI_EXIT.ok)
        throw new Error(`migrate exited ${status}: ${stderr.text}`);
    },
    concurrent: true,
  },
];

beforeAll(async () => {
  const url = await freshDatabase();
  await withDataSource(url, {}, (dataSource) => dataSource.runMigrations({ transaction: 'each' }));
  expectedIndexes = await withDataSource(url, {}, (dataSource) =>
    migratedIndexes(dataSource, 'outbox_event'),
  );
});

afterAll(async () => {
  const adminUrl = requireRunEnv(ADMIN_URL_ENV);
  await withAdminClient(adminUrl, async (client) => {
    for (const name of databases) await dropDatabase(client, name);
  });
});

describe.each(ENTRY_POINTS)('$name', ({ run, concurrent }) => {
  it(`migrates an empty database, then builds an index ${concurrent ? 'concurrently' : 'in its transaction'}`, async () => {
    const url = await freshDatabase();
    await run(url);
    const { applied, indexes, invalid } = await withDataSource(url, {}, async (dataSource) => ({
      applied: (await dataSource.query(`SELECT name FROM migrations ORDER BY id`)).map(
        (row: { name: string }) => row.name,
      ),
      indexes: await migratedIndexes(dataSource, 'outbox_event'),
      invalid: await dataSource.query(
        `SELECT indexrelid::regclass::text AS name FROM pg_index WHERE NOT indisvalid`,
      ),
    }));
    expect(applied).toEqual(OUTBOX_MIGRATIONS.map((Migration) => new Migration().name));
    expect(indexes).toEqual(expectedIndexes);
    expect(invalid).toEqual([]);

    // The last index build again, while a writer's transaction older than the build is open.
    await undoFromLastIndexBuild(url);
    expect(await emitsGoOnDuring(url, 'outbox_event_ordering_idx', () => run(url))).toBe(
      concurrent,
    );
    expect(await withDataSource(url, {}, (ds) => migratedIndexes(ds, 'outbox_event'))).toEqual(
      expectedIndexes,
    );
  });
});

describe('the index migrations', () => {
  it('revert in a transaction or none, and apply again', async () => {
    const url = await freshDatabase();
    await withDataSource(url, {}, async (dataSource) => {
      await dataSource.runMigrations();
      const since =
        OUTBOX_MIGRATIONS.length - OUTBOX_MIGRATIONS.indexOf(OutboxDiscardIndexes1768500000000);
      for (const transaction of ['all', 'none'] as const) {
        for (let i = 0; i < since; i++) await dataSource.undoLastMigration({ transaction });
        const reverted = Object.keys(await migratedIndexes(dataSource, 'outbox_event'));
        expect(reverted).toContain('outbox_event_dead_due_idx');
        expect(reverted).not.toContain('outbox_event_dead_retry_idx');
        expect(reverted).not.toContain('outbox_event_ordering_idx');
        await dataSource.runMigrations();
        expect(await migratedIndexes(dataSource, 'outbox_event')).toEqual(expectedIndexes);
      }
    });
  });

  it('keep the names TypeORM recorded whichever list ran them', () => {
    const names = (list: (new () => MigrationInterface)[]) =>
      list.map((Migration) => new Migration().name);
    const concurrent = outboxMigrations({ concurrentIndexes: true });
    expect(names(concurrent)).toEqual(names(OUTBOX_MIGRATIONS));
    expect(names(outboxMigrations())).toEqual(names(OUTBOX_MIGRATIONS));
    const outside = concurrent
      .filter((Migration) => new Migration().transaction === false)
      .map((Migration) => new Migration().name);
    expect(outside).toEqual([
      'OutboxDiscardIndexes1768500000000',
      'OutboxOrganizationTypeIndex1770000000000',
      'OutboxOrderingIndexes1773500000000',
      'OutboxFairIndex1775500000000',
    ]);
    for (const Migration of OUTBOX_MIGRATIONS) {
      expect(new Migration().transaction).toBeUndefined();
    }
  });

  it('refuse an option that is not a boolean, naming it', () => {
    expect(() => outboxMigrations({ concurrentIndexes: 'yes' as unknown as boolean })).toThrow(
      new InvalidOutboxMigrationsOptionsError('concurrentIndexes', 'yes'),
    );
    expect(() => outboxMigrations({ concurrentIndexes: 'yes' as unknown as boolean })).toThrow(
      'Invalid outboxMigrations() option: concurrentIndexes = "yes": must be a boolean',
    );
    for (const options of [null, 'yes', []]) {
      expect(() => outboxMigrations(options as never)).toThrow(
        new InvalidOutboxMigrationsOptionsError('options', options, 'an object'),
      );
    }
    expect(() => outboxMigrations(null as never)).toThrow(
      'Invalid outboxMigrations() option: options = null: must be an object',
    );
  });
});
