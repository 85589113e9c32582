import { dropTemplateDatabase } from './template-database';
import { takeRun } from './test-run';

/** Jest global teardown: remove this run's databases, then the server if the run started it. */
export default async function globalTeardown(): Promise<void> {
  const run = takeRun();
  if (!run) {
    return;
  }
  try {
    await dropTemplateDatabase(run.adminUrl, run.template);
  } finally {
    await run.stop();
  }
}
