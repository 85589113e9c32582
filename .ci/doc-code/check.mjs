// Compiles every TypeScript block of the documentation against the built package (its `dist`
// and declarations, resolved through its `exports` map as an installed package is), under the
// tsconfig `nest new` (Nest 11) writes: `npm run build` first, then `node .ci/doc-code/check.mjs`.
//
// A block is a module of its own: `.mts` when it awaits at its top level, `.ts` otherwise. What a reader's file
// would import, the check imports: each name the block uses but does not declare, when the
// package, Nest, TypeORM or Terminus exports it (types with `import type`, as the template's
// `isolatedModules` wants). What stands for the reader's own code (an `Invoice` entity, an
// injected `outbox`, an `id`) is declared in context.d.ts. Blocks that are whole files
// (`// src/…` first) are skipped: .ci/check-getting-started.sh builds them in real apps.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const require = createRequire(join(root, 'package.json'));
const work = join(root, 'node_modules', '.cache', 'doc-code');
const DOCS = [
  'README.md',
  'libs/outbox/README.md',
  ...readdirSync(join(root, 'docs')).map((f) => `docs/${f}`),
];

/** name → [module, type-only] for what a block may use without importing it. */
function exportsOf() {
  const known = new Map();
  const add = (module, names, typeOnly) => {
    for (const name of names) if (!known.has(name)) known.set(name, [module, typeOnly]);
  };
  for (const [module, path] of [
    ['nestjs-lease-outbox', 'libs/outbox/dist/index'],
    ['nestjs-lease-outbox/testing', 'libs/outbox/dist/testing/index'],
    ['nestjs-lease-outbox/admin', 'libs/outbox/dist/admin/index'],
    ['nestjs-lease-outbox/bridge', 'libs/outbox/dist/bridge/index'],
  ]) {
    const values = Object.keys(require(join(root, `${path}.js`)));
    add(module, values, false);
    const declarations = readFileSync(join(root, `${path}.d.ts`), 'utf8');
    const types = [...declarations.matchAll(/(?:\btype\s+|export type \{[^}]*?)\b([A-Z]\w*)/g)].map(
      (m) => m[1],
    );
    for (const list of declarations.matchAll(/export type \{([^}]*)\}/g)) {
      types.push(
        ...list[1]
          .split(',')
          .map((n) =>
            n
              .trim()
              .split(/\s+as\s+/)
              .pop(),
          )
          .filter(Boolean),
      );
    }
    add(
      module,
      types.filter((t) => !values.includes(t)),
      true,
    );
  }
  add(
    '@nestjs/common',
    ['Module', 'Injectable', 'Controller', 'Get', 'Post', 'Param', 'Body', 'Logger'],
    false,
  );
  add('@nestjs/common', ['INestApplication', 'CanActivate', 'ExecutionContext'], true);
  add('@nestjs/typeorm', ['TypeOrmModule'], false);
  add(
    '@nestjs/terminus',
    ['HealthCheck', 'HealthCheckService', 'TypeOrmHealthIndicator', 'TerminusModule'],
    false,
  );
  add('typeorm', ['DataSource'], false);
  add('typeorm', ['EntityManager'], true);
  return known;
}

function blocksOf(file) {
  const text = readFileSync(join(root, file), 'utf8');
  const blocks = [];
  let line = 1;
  const fence = /^```ts\n([\s\S]*?)^```$/gm;
  let last = 0;
  for (const match of text.matchAll(fence)) {
    line += text.slice(last, match.index).split('\n').length - 1;
    last = match.index;
    blocks.push({ file, line: line + 1, code: match[1] });
  }
  return blocks;
}

function withImports(code, known) {
  const declared = new Set(
    [
      ...code.matchAll(
        /\b(?:class|interface|type|const|let|function|import)\s+\{?\s*([A-Za-z_]\w*)/g,
      ),
    ].map((m) => m[1]),
  );
  for (const list of code.matchAll(/import(?:\s+type)?\s*\{([^}]*)\}/g)) {
    for (const name of list[1].split(','))
      declared.add(
        name
          .trim()
          .replace(/^type\s+/, '')
          .split(/\s+as\s+/)
          .pop(),
      );
  }
  for (const m of code.matchAll(/import\s+(\w+)\s+from/g)) declared.add(m[1]);
  const used = new Set(
    code.replace(/\/\/.*$|'[^']*'|`[^`]*`/gm, '').match(/\b[A-Za-z_]\w*\b/g) ?? [],
  );
  const imports = new Map();
  for (const name of used) {
    if (declared.has(name) || !known.has(name)) continue;
    const [module, typeOnly] = known.get(name);
    if (!imports.has(module)) imports.set(module, []);
    imports.get(module).push(typeOnly ? `type ${name}` : name);
  }
  const lines = [...imports].map(
    ([module, names]) => `import { ${names.join(', ')} } from '${module}';`,
  );
  return { prelude: lines.join('\n'), count: lines.length };
}

rmSync(work, { recursive: true, force: true });
mkdirSync(join(work, 'node_modules'), { recursive: true });
symlinkSync(join(root, 'libs', 'outbox'), join(work, 'node_modules', 'nestjs-lease-outbox'));
writeFileSync(join(work, 'package.json'), JSON.stringify({ name: 'doc-code', private: true }));
const tsconfig = JSON.parse(readFileSync(join(here, 'tsconfig.nest11.json'), 'utf8'));
tsconfig.compilerOptions.noEmit = true;
tsconfig.compilerOptions.incremental = false;
tsconfig.include = ['test/*', 'context.d.ts'];
writeFileSync(join(work, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
writeFileSync(join(work, 'context.d.ts'), readFileSync(join(here, 'context.d.ts')));
// The reader's own AppModule, which a test imports from `../src/app.module`.
mkdirSync(join(work, 'src'));
mkdirSync(join(work, 'test'));
writeFileSync(join(work, 'src', 'app.module.ts'), readFileSync(join(here, 'app.module.ts')));

const known = exportsOf();
const map = [];
let n = 0;
for (const block of DOCS.flatMap(blocksOf)) {
  if (/^\/\/ src\//.test(block.code)) continue;
  n += 1;
  const { prelude, count } = withImports(block.code, known);
  // An ES module where the block awaits at its top level, else CommonJS as the template's files.
  const topLevelAwait = /^(?:(?:const|let)\s[^=]*=\s*)?await\s/m.test(block.code);
  const name = `test/block${String(n).padStart(2, '0')}.${topLevelAwait ? 'mts' : 'ts'}`;
  // The block's lines keep their numbers after the prelude's, so an error maps back to the doc.
  writeFileSync(join(work, name), `${prelude}\n${block.code}\nexport {};\n`);
  map.push({ name, ...block, codeStart: count === 0 ? 2 : count + 1 });
}

try {
  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', work], {
    stdio: 'pipe',
  });
  console.log(`doc code: ${n} TypeScript blocks of ${DOCS.length} documents compile`);
} catch (error) {
  const out = `${error.stdout}${error.stderr}`;
  for (const line of out.split('\n')) {
    const m = /(test\/block\d+\.m?ts)\((\d+),(\d+)\): (.*)$/.exec(line);
    if (!m) {
      if (line.trim()) console.error(line);
      continue;
    }
    const block = map.find((b) => b.name === m[1]);
    const at = Number(m[2]) - block.codeStart;
    console.error(`${block.file}:${block.line + at}:${m[3]} ${m[4]}`);
  }
  console.error(
    `doc code: TypeScript blocks that do not compile (files in ${relative(root, work)})`,
  );
  process.exit(1);
}
