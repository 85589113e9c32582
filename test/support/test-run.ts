/**
 * How the pieces of one Jest run find each other. Workers are separate processes that inherit
 * the environment global setup leaves behind, so the database coordinates travel as env vars;
 * the stop handle cannot be serialised and stays on `globalThis`, which global setup and global
 * teardown share because both run in Jest's parent process.
 */
export const ADMIN_URL_ENV = 'OUTBOX_TEST_ADMIN_URL';
export const TEMPLATE_ENV = 'OUTBOX_TEST_TEMPLATE';

export interface TestRun {
  adminUrl: string;
  template: string;
  stop(): Promise<void>;
}

const RUN_KEY = Symbol.for('outbox.test.run');

export function rememberRun(run: TestRun): void {
  (globalThis as Record<symbol, unknown>)[RUN_KEY] = run;
}

/** The run global setup remembered, once; undefined when setup never got that far. */
export function takeRun(): TestRun | undefined {
  const store = globalThis as Record<symbol, unknown>;
  const run = store[RUN_KEY] as TestRun | undefined;
  delete store[RUN_KEY];
  return run;
}

/** An env var global setup must have set; a clear message beats a connection error later. */
export function requireRunEnv(name: typeof ADMIN_URL_ENV | typeof TEMPLATE_ENV): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run the tests through Jest so global-setup.ts runs first`);
  }
  return value;
}
