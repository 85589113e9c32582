import type { INestApplicationContext } from '@nestjs/common';
import type { Pool } from 'pg';
import { DataSource } from 'typeorm';

/** The pg internals worth naming when a connection error goes unhandled. */
interface PgClientState {
  _queryable?: boolean;
  _ending?: boolean;
  _activeQuery?: unknown;
  listenerCount(event: string): number;
}

interface PoolState {
  _clients?: PgClientState[];
  _idle?: Array<{ client: PgClientState }>;
}

/**
 * When the process is about to die of an uncaught exception, says which pool held the
 * connection that failed (pg marks it not queryable just before emitting the error) and whether
 * it was checked out: a crash on an unhandled 'error' event is otherwise anonymous. A monitor
 * only observes; the process still exits as it would have.
 */
export function reportCrashContext(app: INestApplicationContext, records: Pool | undefined): void {
  process.on('uncaughtExceptionMonitor', (error) => {
    const pools: Array<[string, PoolState | undefined]> = [
      [
        'outbox (TypeORM) pool',
        (app.get(DataSource).driver as unknown as { master?: PoolState }).master,
      ],
      ['handler records pool', records as unknown as PoolState | undefined],
    ];
    const lines = [`fault worker: uncaught ${String(error)}`];
    for (const [name, pool] of pools) {
      for (const client of pool?._clients ?? []) {
        if (client._queryable !== false) continue;
        const idle = pool?._idle?.some((item) => item.client === client) ?? false;
        lines.push(
          `  broken client in the ${name}: ${idle ? 'idle' : 'checked out'}, ` +
            `query running: ${client._activeQuery ? 'yes' : 'no'}, ` +
            `error listeners: ${client.listenerCount('error')}`,
        );
      }
    }
    if (lines.length === 1) lines.push('  no broken client in either pool (the LISTEN client?)');
    process.stderr.write(`${lines.join('\n')}\n`);
  });
}
