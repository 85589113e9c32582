import { startTcpProxy, type TcpProxy } from '../../support/tcp-proxy';
import {
  createFaultDatabase,
  createFaultTemplate,
  openFaultDatabase,
  type FaultDatabase,
} from './database';
import { startPgServer, type PgServer } from './pg-server';
import { waitUntil } from './processes';

/** The standby's `application_name` on its replication connection: what the primary waits for. */
export const STANDBY_NAME = 'failover_standby';

/**
 * Both servers' settings. `synchronous_commit` stays on (the default, said out loud): with a
 * synchronous standby a commit is acknowledged once the standby has it, which is what the
 * synchronous pair is there to prove.
 */
const REPLICATION = [
  'wal_level=replica',
  'max_wal_senders=10',
  'hot_standby=on',
  'synchronous_commit=on',
];

/**
 * A primary and its hot standby, streaming, each a server of its own (data directory, port),
 * for a failover: the primary is stopped and the standby promoted. The outbox database is made
 * on the primary (a copy of a migrated template, as the suite's own) before the standby's base
 * backup is taken, so the standby starts with it.
 */
export interface ReplicaPair {
  readonly synchronous: boolean;
  readonly primary: PgServer;
  readonly standby: PgServer;
  /** The outbox database on the primary. */
  readonly onPrimary: FaultDatabase;
  /** The same database on the standby: read-only until the promotion, the new primary's after. */
  readonly onStandby: FaultDatabase;
  /**
   * Asynchronous pair only: from now on the bytes the primary streams are dropped on their way,
   * with no error on either side, so what it commits from here on never reaches the standby.
   */
  cutReplication(): void;
  /** `pg_ctl promote` on the standby; resolves once `pg_is_in_recovery()` is false there. */
  promote(timeoutMs: number): Promise<void>;
  /** Stops both servers and removes their directories; never throws. */
  destroy(): Promise<void>;
}

/** Servers of pairs not yet destroyed, stopped by the exit handler below if the runner dies. */
const live = new Set<PgServer>();
process.on('exit', () => {
  for (const server of live) server.destroySync();
});

/**
 * Starts a pair with the outbox database `name`. Synchronous: the primary lists the standby in
 * `synchronous_standby_names`, so a commit is acknowledged only once the standby has flushed it.
 * Asynchronous: no synchronous standby, and the standby streams through a relay that
 * `cutReplication` silences (the standby lagging behind, as a congested link leaves it).
 */
export async function startReplicaPair(options: {
  synchronous: boolean;
  name: string;
}): Promise<ReplicaPair> {
  const servers: PgServer[] = [];
  let relay: TcpProxy | undefined;
  const dbs: FaultDatabase[] = [];
  const destroy = async () => {
    await Promise.all(dbs.map((db) => db.close().catch(() => undefined)));
    await relay?.close();
    for (const server of servers) {
      server.destroySync();
      live.delete(server);
    }
  };
  const started = (server: PgServer) => {
    servers.push(server);
    live.add(server);
    return server;
  };
  try {
    const primary = started(
      await startPgServer({ needs: ['pg_basebackup'], settings: REPLICATION }),
    );
    await createFaultTemplate(primary);
    const onPrimary = await createFaultDatabase(primary, options.name);
    dbs.push(onPrimary);
    if (!options.synchronous) {
      relay = await startTcpProxy({ host: '127.0.0.1', port: primary.port });
    }
    const standby = started(
      await startPgServer({
        bin: primary.bin,
        settings: REPLICATION,
        standbyOf: { port: relay?.port ?? primary.port, applicationName: STANDBY_NAME },
      }),
    );
    const onStandby = openFaultDatabase(options.name, standby.url(options.name));
    dbs.push(onStandby);
    // Only now: a primary waiting for a standby that does not exist yet would commit nothing.
    if (options.synchronous) {
      await onPrimary.query(`ALTER SYSTEM SET synchronous_standby_names = '${STANDBY_NAME}'`);
      await onPrimary.query('SELECT pg_reload_conf()');
    }
    const streaming = await waitUntil(
      async () =>
        (
          await onPrimary.query(
            `SELECT 1 FROM pg_stat_replication
             WHERE application_name = $1 AND state = 'streaming' AND sync_state = $2`,
            [STANDBY_NAME, options.synchronous ? 'sync' : 'async'],
          )
        ).length === 1,
      30_000,
    );
    if (!streaming) throw new Error(`standby ${STANDBY_NAME} is not streaming after 30 s`);
    return {
      synchronous: options.synchronous,
      primary,
      standby,
      onPrimary,
      onStandby,
      cutReplication() {
        if (!relay) throw new Error('a synchronous pair has no replication to cut');
        relay.blackhole();
      },
      async promote(timeoutMs) {
        await standby.promote();
        const promoted = await waitUntil(
          async () =>
            (await onStandby.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r'))[0].r ===
            false,
          timeoutMs,
          20,
        );
        if (!promoted) throw new Error(`standby still in recovery ${timeoutMs} ms after promote`);
      },
      destroy,
    };
  } catch (error) {
    await destroy();
    throw error;
  }
}
