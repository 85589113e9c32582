import { execFileSync } from 'node:child_process';
import { chmod, chown, copyFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { INestApplication } from '@nestjs/common';
import { Client, type ClientConfig } from 'pg';
import { DataSource } from 'typeorm';
import { OUTBOX_MIGRATIONS, OutboxEngine } from '@app/outbox';
import { startPgServer, type PgServer } from './faults/support/pg-server';
import { createOutboxApp, eventually } from './support/outbox-app';

/**
 * The LISTEN connection is made with the DataSource's connection settings whole: on a server that
 * accepts TLS connections only (`hostssl` alone in pg_hba.conf, a certificate made here), the
 * listener's backend is a TLS one whether the app sets `ssl` at the top of its TypeORM options or
 * in `extra`, as pg's own options.
 */

// A self-signed certificate: the client is told not to verify it, TLS is what is proven here.
const TLS = { rejectUnauthorized: false };

let server: PgServer;
let url: string;
let certificates: string;

beforeAll(async () => {
  certificates = await mkdtemp(join(tmpdir(), 'outbox-tls-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      '/CN=localhost',
      '-days',
      '2',
      '-keyout',
      join(certificates, 'server.key'),
      '-out',
      join(certificates, 'server.crt'),
    ],
    { stdio: 'ignore' },
  );
  server = await startPgServer({
    settings: ['ssl=on', 'ssl_cert_file=server.crt', 'ssl_key_file=server.key'],
    prepare: async (dataDir, owner) => {
      // The server refuses a key that others can read or that its user does not own.
      for (const file of ['server.crt', 'server.key']) {
        const target = join(dataDir, file);
        await copyFile(join(certificates, file), target);
        if (owner) await chown(target, owner.uid, owner.gid);
        await chmod(target, 0o600);
      }
      await writeFile(join(dataDir, 'pg_hba.conf'), 'hostssl all all 127.0.0.1/32 trust\n');
    },
  });
  url = server.url();
  const migrator = new DataSource({
    type: 'postgres',
    url,
    ssl: TLS,
    migrations: OUTBOX_MIGRATIONS,
  });
  await migrator.initialize();
  try {
    await migrator.runMigrations({ transaction: 'each' });
  } finally {
    await migrator.destroy();
  }
}, 120_000);

afterAll(async () => {
  server?.destroySync();
  await rm(certificates, { recursive: true, force: true });
});

async function query<R>(text: string, config: ClientConfig = { ssl: TLS }): Promise<R[]> {
  const client = new Client({ connectionString: url, ...config });
  await client.connect();
  try {
    return (await client.query(text)).rows as R[];
  } finally {
    await client.end();
  }
}

it('the server takes TLS connections only', async () => {
  await expect(query('SELECT 1', { ssl: false })).rejects.toThrow(/no encryption|pg_hba/);
  expect(
    await query<{ ssl: boolean }>('SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()'),
  ).toEqual([{ ssl: true }]);
});

it.each([
  ['at the top of the TypeORM options', { ssl: TLS }],
  ['in extra, as pg options', { extra: { ssl: TLS } }],
])('listens over TLS with ssl set %s', async (_where, typeorm) => {
  let app: INestApplication | undefined;
  try {
    app = await createOutboxApp({
      url,
      typeorm,
      outbox: { retention: { enabled: false }, listen: { reconnectMinMs: 200 } },
    });
    const engine = app.get(OutboxEngine);
    await eventually('the listener to be listening', () => engine.listenerState === 'listening');
    const backends = await query<{ ssl: boolean }>(
      `SELECT s.ssl FROM pg_stat_ssl AS s JOIN pg_stat_activity AS a USING (pid)
       WHERE a.application_name = 'outbox-listener'`,
    );
    expect(backends).toEqual([{ ssl: true }]);
  } finally {
    await app?.close();
  }
});
