import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';

/**
 * The reference app's modules talk to each other only through events and small read ports: a
 * module owns the tables of its entities, and no other module imports those entities, its
 * services, or names its tables in SQL. Another module may import only its `*.module.ts` (to
 * reach what it exports) and its `*.query.ts` read port. This reads the sources, so a new
 * shortcut fails here before it ships.
 */

const SRC = resolve(__dirname, '../../apps/reference/src');

/** Directories that hold no tables of their own: the composition root and shared code. */
const SHARED = new Set([
  'common',
  'config',
  'database',
  'events',
  'health',
  'metrics',
  'outbox-admin',
]);

interface SourceFile {
  module: string;
  path: string;
  text: string;
}

function sourcesOf(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourcesOf(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') ? [path] : [];
  });
}

const files: SourceFile[] = sourcesOf(SRC)
  .map((path) => ({ path, module: relative(SRC, path).split('/')[0] }))
  .filter((file) => file.module.endsWith('.ts') === false && !SHARED.has(file.module))
  .map((file) => ({ ...file, text: readFileSync(file.path, 'utf8') }));

const modules = [...new Set(files.map((f) => f.module))].sort();

/** Table names declared with `@Entity({ name })` in each module. */
const tablesOf = new Map(
  modules.map((module) => [
    module,
    files
      .filter((f) => f.module === module)
      .flatMap((f) => [...f.text.matchAll(/@Entity\(\{\s*name:\s*'([a-z_]+)'/g)].map((m) => m[1])),
  ]),
);

const ALLOWED_FROM_ANOTHER_MODULE = /(?:\.module|\.query)$/;

function crossImports(file: SourceFile): string[] {
  return [...file.text.matchAll(/from '(\.\.?\/[^']+)'/g)]
    .map((m) => resolve(join(file.path, '..'), m[1]))
    .filter((target) => {
      const module = relative(SRC, target).split('/')[0];
      return module !== file.module && modules.includes(module);
    })
    .filter((target) => !ALLOWED_FROM_ANOTHER_MODULE.test(target))
    .map((target) => relative(SRC, target));
}

function foreignTables(file: SourceFile): string[] {
  return modules
    .filter((owner) => owner !== file.module)
    .flatMap((owner) => tablesOf.get(owner) ?? [])
    .filter((table) =>
      new RegExp(`\\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\\s+${table}\\b`, 'i').test(file.text),
    );
}

describe('reference app module boundaries', () => {
  it('finds the modules and the tables each owns', () => {
    expect(Object.fromEntries(tablesOf)).toEqual({
      audit: ['audit_entry'],
      invoices: ['invoice'],
      notifications: ['mail_log', 'notification'],
      organizations: ['member', 'organization'],
      webhooks: ['webhook_endpoint'],
    });
  });

  it.each(modules)(
    '%s imports nothing of another module but its module file and read port',
    (module) => {
      const found = files
        .filter((f) => f.module === module)
        .flatMap((f) => crossImports(f).map((target) => `${relative(SRC, f.path)} -> ${target}`));
      expect(found).toEqual([]);
    },
  );

  it.each(modules)("%s names no other module's table in SQL", (module) => {
    const found = files
      .filter((f) => f.module === module)
      .flatMap((f) => foreignTables(f).map((table) => `${relative(SRC, f.path)}: ${table}`));
    expect(found).toEqual([]);
  });
});
