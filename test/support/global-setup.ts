import { withAdminClient } from './admin-client';
import { describeUrl } from './database-url';
import { startPostgresServer } from './postgres-server';
import { poolerUrl } from './pooler';
import { createTemplateDatabase } from './template-database';
import { ADMIN_URL_ENV, TEMPLATE_ENV, rememberRun } from './test-run';

/**
 * Jest global setup: one PostgreSQL and one migrated template per run; each test file then
 * copies the template into its own database (see test-database.ts) so files run in parallel.
 */
export default async function globalSetup(): Promise<void> {
  const startedAt = Date.now();
  const pooler = poolerUrl();
  const server = await startPostgresServer();
  // A unique name lets runs share one DATABASE_URL server without touching each other.
  const template = `outbox_tpl_${process.pid}_${Date.now()}`;
  try {
    const version = await withAdminClient(server.adminUrl, async (client) => {
      const result = await client.query<{ server_version: string }>('SHOW server_version');
      return result.rows[0]?.server_version ?? 'unknown';
    });
    await createTemplateDatabase(server.adminUrl, template);
    process.stdout.write(
      `\n[outbox tests] PostgreSQL ${version} (${server.kind}) at ${describeUrl(server.adminUrl)}, ` +
        `template ${template}, ready in ${Date.now() - startedAt} ms\n` +
        (pooler ? `[outbox tests] the library through the pooler at ${describeUrl(pooler)}\n` : ''),
    );
  } catch (error) {
    // Jest skips global teardown when setup throws, so nothing else would stop the server.
    await server.stop().catch(() => undefined);
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(
      `test database setup failed on ${server.kind} PostgreSQL at ${describeUrl(server.adminUrl)}: ${reason}`,
      { cause: error },
    );
  }

  process.env[ADMIN_URL_ENV] = server.adminUrl;
  process.env[TEMPLATE_ENV] = template;
  rememberRun({ adminUrl: server.adminUrl, template, stop: () => server.stop() });
}
