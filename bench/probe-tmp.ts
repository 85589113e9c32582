import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { OUTBOX_ENTITIES, OutboxRepository } from '../libs/outbox/src';
import { insertEvents, startServer, withFreshDatabase } from './support/database';
async function main() {
  const server = await startServer();
  await withFreshDatabase(server, 'probe', async (db) => {
    const ds = new DataSource({ type: 'postgres', url: db.url, entities: [...OUTBOX_ENTITIES] });
    await ds.initialize();
    const repo = new OutboxRepository(ds);
    const time = async (label: string) => {
      const t = performance.now();
      const r = await repo.pendingState();
      console.log(label, (performance.now() - t).toFixed(1), 'ms', r.ok ? JSON.stringify(r.value.horizon) : r.error.message);
    };
    await time('empty');
    const holder = new Client({ connectionString: db.url });
    await holder.connect();
    await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await holder.query('SELECT count(*) FROM outbox_event');
    for (let round = 0; round < 4; round++) {
      await insertEvents(db.sql, 100000);
      await db.sql.query(`UPDATE outbox_event SET next_attempt_at = now() + interval '1 minute', attempts = 1, lease_expires_at = now() + interval '1 minute' WHERE dispatched_at IS NULL`);
      await db.sql.query(`UPDATE outbox_event SET dispatched_at = now(), lease_expires_at = NULL WHERE dispatched_at IS NULL`);
      await insertEvents(db.sql, 100);
      await time(`held, ${(round + 1) * 100}k delivered`);
      await time(`again`);
    }
    await holder.query('ROLLBACK');
    await holder.end();
    await ds.destroy();
  });
  await server.stop();
}
main();
