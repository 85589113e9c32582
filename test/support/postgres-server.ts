import { startContainerPostgres } from './container-postgres-server';
import { dockerEngineAnswers } from './docker-engine';
import { startEmbeddedPostgres } from './embedded-postgres-server';

export type PostgresServerKind = 'env' | 'testcontainers' | 'embedded';

export interface PostgresServer {
  kind: PostgresServerKind;
  /** A superuser-ish URL that may CREATE and DROP databases. */
  adminUrl: string;
  stop(): Promise<void>;
}

/**
 * The PostgreSQL the suites run against, most explicit choice first: a DATABASE_URL the caller
 * manages (CI service containers, a second major version), then a container when Docker is
 * there, then embedded binaries so a plain `npm test` works on a machine with neither.
 */
export async function startPostgresServer(): Promise<PostgresServer> {
  const fromEnv = process.env.DATABASE_URL;
  if (fromEnv) {
    // The caller owns that server's lifetime; only our databases on it are ours to drop.
    return { kind: 'env', adminUrl: fromEnv, stop: () => Promise.resolve() };
  }

  if (await dockerEngineAnswers()) {
    const container = await startContainerPostgres();
    if (container) {
      return { kind: 'testcontainers', ...container };
    }
  }

  return { kind: 'embedded', ...(await startEmbeddedPostgres()) };
}
