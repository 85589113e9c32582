import { DataSource } from 'typeorm';
import { OUTBOX_ENTITIES, OutboxLeaseStore } from '@app/outbox';
import { runBounded } from '@app/outbox/store/bounded-statement.util';
import { RetentionStore } from '@app/outbox/store/retention.store';
import { useTestDatabase } from './support/test-database';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy';
import { eventually } from './support/outbox-app';

/**
 * Every statement the repository runs on its own is bounded: by the server (statement and lock
 * timeouts) while the server answers, and by the client (a deadline that discards the
 * connection) when it does not.
 */

const database = useTestDatabase();

const claimOptions = { limit: 10, leaseMs: 60_000, deadRetryMs: 60_000 };

describe('OutboxLeaseStore statement bounds', () => {
  it('inlines values as literals the server reads back exactly, whatever quotes and backslashes they hold', async () => {
    const hostile = `x'); DROP TABLE outbox_event; -- \\' "q" \\\\ $1 \u00e9 {a,b}`;
    const rows = await runBounded(
      database.db.dataSource,
      'SELECT $1::text AS text, $2::text[] AS list, $3::jsonb AS doc, $4::int AS n',
      [hostile, [hostile, null, 'b'], JSON.stringify({ hostile }), 7],
      { statementTimeoutMs: 1000, lockTimeoutMs: 1000 },
    );
    expect(rows).toEqual([{ text: hostile, list: [hostile, null, 'b'], doc: { hostile }, n: 7 }]);
    await expect(database.sql.query('SELECT count(*) FROM outbox_event')).resolves.toBeDefined();
  });

  it('a lock held on outbox_event (as a migration would) fails claim, settle, state and sweep with 55P03 instead of waiting', async () => {
    const repo = new OutboxLeaseStore(database.db.dataSource, { lockTimeoutMs: 100 });
    const locker = await database.db.connect();
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE outbox_event IN ACCESS EXCLUSIVE MODE');
    try {
      const results = await Promise.all([
        repo.claim(claimOptions),
        repo.markDelivered([
          { id: '00000000-0000-7000-8000-000000000000', attempts: 1, handlers: [] },
        ]),
        repo.pendingState(),
        new RetentionStore(database.db.dataSource, { lockTimeoutMs: 100 }).sweep({
          retentionMs: 0,
          batchSize: 10,
        }),
      ]);
      for (const result of results) {
        expect(result).toMatchObject({ ok: false, error: { code: '55P03' } });
      }
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
    }
    // The lock gone, the same repository works again: failed connections were not reused.
    await expect(repo.claim(claimOptions)).resolves.toMatchObject({ ok: true, value: [] });
  });

  it('a statement slower than statementTimeoutMs is cancelled by the server (57014)', async () => {
    const repo = new OutboxLeaseStore(database.db.dataSource, { statementTimeoutMs: 200 });
    // A row lock held elsewhere makes the settle wait on it: a wait the lock timeout allows but
    // the statement timeout does not.
    await database.sql.query(
      `INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload, attempts)
       VALUES ('00000000-0000-7000-8000-000000000001', 't', 'a', '1', '{}', 1)`,
    );
    const locker = await database.db.connect();
    await locker.query('BEGIN');
    await locker.query(`SELECT 1 FROM outbox_event FOR UPDATE`);
    try {
      const result = await repo.markDelivered([
        { id: '00000000-0000-7000-8000-000000000001', attempts: 1, handlers: ['h'] },
      ]);
      expect(result).toMatchObject({ ok: false, error: { code: '57014' } });
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
      await database.sql.query('TRUNCATE outbox_event');
    }
  });

  it('an exhausted pool is a typed failure that says nothing was sent, and the connection is not wasted', async () => {
    const small = new DataSource({
      type: 'postgres',
      url: database.db.url,
      entities: [...OUTBOX_ENTITIES],
      poolSize: 1,
    });
    await small.initialize();
    const holder = small.createQueryRunner();
    try {
      await holder.connect();
      const repo = new OutboxLeaseStore(small, { statementTimeoutMs: 200 });
      const result = await repo.claim(claimOptions);
      expect(result).toMatchObject({
        ok: false,
        error: {
          message: 'Outbox claim failed: no free pool connection within 1200 ms; nothing was sent',
        },
      });
      await holder.release();
      await expect(repo.claim(claimOptions)).resolves.toMatchObject({ ok: true, value: [] });
    } finally {
      await holder.release();
      await small.destroy();
    }
  });

  describe('through a connection that stops answering', () => {
    let proxy: TcpProxy;
    let proxied: DataSource;

    // A proxy and a one-connection DataSource through it per test, so each test knows which
    // connection its statements use.
    beforeEach(async () => {
      const target = new URL(database.db.url);
      proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
      const url = new URL(database.db.url);
      url.host = `127.0.0.1:${proxy.port}`;
      proxied = new DataSource({
        type: 'postgres',
        url: url.toString(),
        entities: [...OUTBOX_ENTITIES],
        poolSize: 1,
      });
      await proxied.initialize();
    });

    afterEach(async () => {
      await proxied?.destroy();
      await proxy?.close();
    });

    it('a connection reset mid-statement is a typed failure, not a crash, and the next statement gets a fresh connection', async () => {
      const repo = new OutboxLeaseStore(proxied, { statementTimeoutMs: 30_000 });
      await database.sql.query(
        `INSERT INTO outbox_event (id, type, aggregate_type, aggregate_id, payload, attempts)
         VALUES ('00000000-0000-7000-8000-0000000000a1', 't', 'a', '1', '{}', 1)`,
      );
      const locker = await database.db.connect();
      await locker.query('BEGIN');
      await locker.query(`SELECT 1 FROM outbox_event FOR UPDATE`);
      try {
        // The settle waits on the row lock, so it is in flight when the connection is reset.
        const settling = repo.markDelivered([
          { id: '00000000-0000-7000-8000-0000000000a1', attempts: 1, handlers: ['h'] },
        ]);
        await eventually('the settle waits on the lock', async () => {
          const { rows } = await database.sql.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock'`,
          );
          return rows[0].n > 0;
        });
        proxy.reset();
        const result = await settling;
        expect(result.ok).toBe(false);
      } finally {
        await locker.query('ROLLBACK');
        await locker.end();
        await database.sql.query('TRUNCATE outbox_event');
      }
      await expect(repo.claim(claimOptions)).resolves.toMatchObject({ ok: true, value: [] });
    });

    it('a server error (lock timeout) rolls back and keeps the connection; it is not replaced', async () => {
      const repo = new OutboxLeaseStore(proxied, { lockTimeoutMs: 100 });
      await expect(repo.claim(claimOptions)).resolves.toMatchObject({ ok: true });
      const connectionsBefore = proxy.connections.length;
      const locker = await database.db.connect();
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE outbox_event IN ACCESS EXCLUSIVE MODE');
      try {
        for (let i = 0; i < 3; i++) {
          await expect(repo.claim(claimOptions)).resolves.toMatchObject({
            ok: false,
            error: { code: '55P03' },
          });
        }
      } finally {
        await locker.query('ROLLBACK');
        await locker.end();
      }
      await expect(repo.claim(claimOptions)).resolves.toMatchObject({ ok: true });
      expect(proxy.connections.length).toBe(connectionsBefore);
    });

    it('returns a typed failure once the client deadline passes, discards the connection, and works again on a fresh one', async () => {
      const repo = new OutboxLeaseStore(proxied, { statementTimeoutMs: 300 });
      await expect(repo.claim(claimOptions)).resolves.toMatchObject({ ok: true });
      proxy.blackhole();

      const result = await repo.claim(claimOptions);
      expect(result.ok).toBe(false);
      if (result.ok) return;
      expect(result.error.message).toBe(
        'Outbox claim failed: no answer from the database within 1300 ms; the connection was discarded',
      );
      // The black-holed connection was closed by the client, not handed back to the pool.
      await eventually('the client closed the black-holed connection', () =>
        proxy.connections.some((c) => c.blackholed && c.clientClosed),
      );
      await expect(repo.claim(claimOptions)).resolves.toMatchObject({ ok: true, value: [] });
    });
  });
});
