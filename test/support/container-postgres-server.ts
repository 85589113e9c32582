export interface ContainerServer {
  adminUrl: string;
  stop(): Promise<void>;
}

/** Overridable so a developer can run the suites against another major version locally. */
const DEFAULT_IMAGE = 'postgres:17-alpine';

/**
 * PostgreSQL in a testcontainers-managed container, or undefined when testcontainers cannot
 * reach an engine. testcontainers is loaded here, not at the top of the file: it is heavy, and
 * testcontainers 12 needs Node >= 22.22 (its undici uses zlib zstd), so on older Node the
 * require itself throws; that is reported and treated like a missing engine.
 */
export async function startContainerPostgres(): Promise<ContainerServer | undefined> {
  let testcontainers: typeof import('@testcontainers/postgresql');
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    testcontainers = await import('@testcontainers/postgresql');
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    process.stderr.write(
      `[outbox tests] Docker answers but testcontainers could not use it (testcontainers 12 ` +
        `needs Node >= 22.22, this is ${process.version}): ${reason}. Using embedded PostgreSQL.\n`,
    );
    return undefined;
  }

  const image = process.env.OUTBOX_TEST_PG_IMAGE ?? DEFAULT_IMAGE;
  const container = await new testcontainers.PostgreSqlContainer(image).start();
  return {
    adminUrl: container.getConnectionUri(),
    stop: async () => {
      await container.stop();
    },
  };
}
