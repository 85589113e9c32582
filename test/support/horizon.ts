import type { Client } from 'pg';

/** A transaction holding the xmin horizon; `release` ends it and its connection. */
export interface HeldHorizon {
  release(): Promise<void>;
}

/**
 * Holds the xmin horizon the way a long report or a backup does: a `REPEATABLE READ`
 * transaction that has taken its snapshot and stays open until `release`.
 */
export async function holdHorizon(connect: () => Promise<Client>): Promise<HeldHorizon> {
  const holder = await connect();
  await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
  await holder.query('SELECT count(*) FROM outbox_event');
  let released: Promise<void> | undefined;
  return {
    release: () =>
      (released ??= holder
        .query('ROLLBACK')
        .catch(() => undefined)
        .then(() => holder.end())),
  };
}
