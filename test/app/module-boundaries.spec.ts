import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import * as ts from 'typescript';

/**
 * The reference app's modules talk to each other only through events and small read ports: a
 * module owns the tables of its entities, and no other module imports those entities, its
 * services, or names its tables in SQL. Another module may import only its `*.module.ts` (to
 * reach what it exports) and its `*.query.ts` read port. This reads the sources, so a new
 * shortcut fails here before it ships.
 *
 * The app uses the outbox the way users will: only through the library's public API (the
 * package root `@app/outbox`, and `@app/outbox/testing` in tests), never through the outbox's
 * tables.
 */

const SRC = resolve(__dirname, '../../apps/reference/src');
const MIGRATIONS = resolve(__dirname, '../../migrations');
const LIBRARY = resolve(__dirname, '../../libs/outbox');
const PACKAGE_ROOT = '@app/outbox';
const TESTING_ENTRY = '@app/outbox/testing';
/** The add-ons' entries, which the app imports as a user does. */
const ADD_ON_ENTRIES = ['@app/outbox/admin', '@app/outbox/bridge'];

/** Directories that hold no tables of their own: the composition root and shared code. */
const SHARED = new Set([
  'auth',
  'common',
  'config',
  'database',
  'dev-server',
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

function sourcesOf(dir: string, withSpecs = false): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourcesOf(path, withSpecs);
    const spec = entry.name.endsWith('.spec.ts');
    return entry.name.endsWith('.ts') && (withSpecs || !spec) ? [path] : [];
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

/** Every TypeScript file of the app (its sources, tests beside them, and its migrations). */
const appFiles = [...sourcesOf(SRC, true), ...sourcesOf(MIGRATIONS, true)].map((path) => ({
  path,
  test: path.endsWith('.spec.ts'),
  source: ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true),
}));
type AppFile = (typeof appFiles)[number];

function shown(path: string): string {
  return relative(resolve(__dirname, '../..'), path);
}

function walk(node: ts.Node, visit: (node: ts.Node) => void): void {
  visit(node);
  ts.forEachChild(node, (child) => walk(child, visit));
}

/** Each module a file names: imports, re-exports, `import()` and `require()`, with the names it takes. */
function importsOf(file: AppFile): { specifier: string; names: string[] | null }[] {
  const found: { specifier: string; names: string[] | null }[] = [];
  walk(file.source, (node) => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      found.push({ specifier: node.moduleSpecifier.text, names: namesTaken(node) });
    } else if (
      ts.isCallExpression(node) &&
      (node.expression.kind === ts.SyntaxKind.ImportKeyword ||
        (ts.isIdentifier(node.expression) && node.expression.text === 'require')) &&
      node.arguments.length > 0 &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      found.push({ specifier: node.arguments[0].text, names: null });
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    ) {
      found.push({ specifier: node.moduleReference.expression.text, names: null });
    }
  });
  return found;
}

/**
 * The names an import or re-export takes from its module (`default` for a default import);
 * null when it takes the whole module (`import * as`, `export *`).
 */
function namesTaken(node: ts.ImportDeclaration | ts.ExportDeclaration): string[] | null {
  if (ts.isExportDeclaration(node)) {
    if (!node.exportClause) return null;
    if (!ts.isNamedExports(node.exportClause)) return null;
    return node.exportClause.elements.map((e) => (e.propertyName ?? e.name).text);
  }
  const clause = node.importClause;
  if (!clause) return [];
  const names = clause.name ? ['default'] : [];
  const bindings = clause.namedBindings;
  if (bindings && ts.isNamespaceImport(bindings)) return null;
  if (bindings) names.push(...bindings.elements.map((e) => (e.propertyName ?? e.name).text));
  return names;
}

/**
 * What an import of the library may name: the package root and the add-ons' entries, and the
 * testing entry in tests.
 */
function libraryImportViolation(file: AppFile, specifier: string): string | undefined {
  if (specifier === PACKAGE_ROOT || ADD_ON_ENTRIES.includes(specifier)) return undefined;
  if (specifier === TESTING_ENTRY) {
    return file.test ? undefined : `${specifier} (the testing entry, outside a test)`;
  }
  if (specifier.startsWith(`${PACKAGE_ROOT}/`) || specifier.startsWith('nestjs-lease-outbox')) {
    return `${specifier} (not the package root ${PACKAGE_ROOT})`;
  }
  if (specifier.startsWith('.') || specifier.startsWith('/')) {
    const target = resolve(dirname(file.path), specifier);
    if (target === LIBRARY || target.startsWith(`${LIBRARY}/`)) {
      return `${specifier} (a path into libs/outbox)`;
    }
  }
  return undefined;
}

/** The names a module exports, read from its export lists (following `export * from`). */
function exportedNames(path: string): Set<string> {
  const file = [path, `${path}.ts`, join(path, 'index.ts')].find(
    (candidate) =>
      candidate.endsWith('.ts') && existsSync(candidate) && statSync(candidate).isFile(),
  );
  if (!file) throw new Error(`no module at ${path}`);
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
  const names = new Set<string>();
  for (const statement of source.statements) {
    if (ts.isExportDeclaration(statement)) {
      if (statement.exportClause && ts.isNamedExports(statement.exportClause)) {
        statement.exportClause.elements.forEach((e) => names.add(e.name.text));
      } else if (statement.exportClause && ts.isNamespaceExport(statement.exportClause)) {
        names.add(statement.exportClause.name.text);
      } else if (statement.moduleSpecifier && ts.isStringLiteral(statement.moduleSpecifier)) {
        const target = resolve(dirname(file), statement.moduleSpecifier.text);
        exportedNames(target).forEach((name) => names.add(name));
      }
    } else if (
      ts.canHaveModifiers(statement) &&
      ts.getModifiers(statement)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)
    ) {
      if (ts.isVariableStatement(statement)) {
        statement.declarationList.declarations.forEach((d) => {
          if (ts.isIdentifier(d.name)) names.add(d.name.text);
        });
      } else {
        const name = (statement as ts.DeclarationStatement).name;
        if (name && ts.isIdentifier(name)) names.add(name.text);
      }
    }
  }
  return names;
}

const PUBLIC_API = new Map([
  [PACKAGE_ROOT, exportedNames(join(LIBRARY, 'src/index.ts'))],
  [TESTING_ENTRY, exportedNames(join(LIBRARY, 'src/testing/index.ts'))],
  ...ADD_ON_ENTRIES.map(
    (entry) =>
      [
        entry,
        exportedNames(join(LIBRARY, 'src', entry.slice(`${PACKAGE_ROOT}/`.length), 'index.ts')),
      ] as const,
  ),
]);

/** Names taken from the package root or the testing entry that the entry does not export. */
function unexportedNames(file: AppFile): string[] {
  const found: string[] = [];
  for (const { specifier, names } of importsOf(file)) {
    const exported = PUBLIC_API.get(specifier);
    if (!exported) continue;
    if (names === null) {
      // A whole-module import: each `ns.name` it reads must be exported.
      found.push(...namespaceReads(file, specifier).filter((name) => !exported.has(name)));
    } else {
      found.push(...names.filter((name) => !exported.has(name)));
    }
  }
  return found;
}

/** The `ns.name` reads of each `import * as ns from specifier` in the file. */
function namespaceReads(file: AppFile, specifier: string): string[] {
  const namespaces = new Set<string>();
  walk(file.source, (node) => {
    const bindings = ts.isImportDeclaration(node) ? node.importClause?.namedBindings : undefined;
    if (
      bindings &&
      ts.isNamespaceImport(bindings) &&
      ts.isStringLiteral((node as ts.ImportDeclaration).moduleSpecifier) &&
      ((node as ts.ImportDeclaration).moduleSpecifier as ts.StringLiteral).text === specifier
    ) {
      namespaces.add(bindings.name.text);
    }
  });
  const reads: string[] = [];
  walk(file.source, (node) => {
    if (
      ts.isPropertyAccessExpression(node) &&
      ts.isIdentifier(node.expression) &&
      namespaces.has(node.expression.text)
    ) {
      reads.push(node.name.text);
    }
  });
  return reads;
}

/** The outbox's own tables, and the library names that stand for them. */
const OUTBOX_TABLES = /\boutbox_(?:event|dispatcher|admin_change)\b/i;
const OUTBOX_TABLE_NAMES = new Set(['OUTBOX_TABLE', 'OutboxEventEntity']);

/**
 * Where a file reaches the outbox's tables itself: a string or template (SQL) naming
 * `outbox_event` or `outbox_dispatcher`, or the table's name or entity from the library used in
 * code. Registering `OUTBOX_ENTITIES` with TypeORM is not reading the table.
 */
function outboxTableUses(file: AppFile): string[] {
  const found: string[] = [];
  const at = (node: ts.Node) =>
    `line ${file.source.getLineAndCharacterOfPosition(node.getStart(file.source)).line + 1}`;
  walk(file.source, (node) => {
    const text =
      ts.isStringLiteralLike(node) ||
      ts.isTemplateHead(node) ||
      ts.isTemplateMiddle(node) ||
      ts.isTemplateTail(node)
        ? node.text
        : undefined;
    const table = text === undefined ? null : OUTBOX_TABLES.exec(text);
    if (table) found.push(`${at(node)}: ${table[0]} in a string`);
    if (ts.isIdentifier(node) && OUTBOX_TABLE_NAMES.has(node.text)) {
      found.push(`${at(node)}: ${node.text}`);
    }
  });
  return found;
}

/** Migrations that ran before this rule and had to move rows of the outbox's table. */
const HISTORIC_OUTBOX_MIGRATIONS = new Set(['migrations/1766500000000-webhooks-on-outbox.ts']);

describe('the reference app uses only the library public API', () => {
  it('reads every app file', () => {
    expect(appFiles.map((f) => shown(f.path))).toEqual(
      expect.arrayContaining([
        'apps/reference/src/main.ts',
        'apps/reference/src/webhooks/webhook-deliveries.query.ts',
        'migrations/index.ts',
      ]),
    );
  });

  it('imports the library only through its entry points (the testing entry in tests alone)', () => {
    const found = appFiles.flatMap((file) =>
      importsOf(file)
        .map(({ specifier }) => libraryImportViolation(file, specifier))
        .filter((violation) => violation !== undefined)
        .map((violation) => `${shown(file.path)} -> ${violation}`),
    );
    expect(found).toEqual([]);
  });

  it('imports from the package root and the testing entry only names they export', () => {
    expect(PUBLIC_API.get(PACKAGE_ROOT)).toContain('OutboxAdmin');
    expect(PUBLIC_API.get(TESTING_ENTRY)).toContain('drainUntilIdle');
    expect(PUBLIC_API.get('@app/outbox/bridge')).toContain('natsJetStream');
    const found = appFiles.flatMap((file) =>
      unexportedNames(file).map((name) => `${shown(file.path)}: ${name}`),
    );
    expect(found).toEqual([]);
  });

  it("never touches the outbox's tables: no outbox_event or outbox_dispatcher in SQL", () => {
    const found = appFiles
      .filter((file) => !HISTORIC_OUTBOX_MIGRATIONS.has(shown(file.path)))
      .flatMap((file) => outboxTableUses(file).map((use) => `${shown(file.path)} ${use}`));
    expect(found).toEqual([]);
  });
});

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
