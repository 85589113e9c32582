// Gives each entry point of the CommonJS build an ES module face, for apps that `import` it:
//   dist/esm/<entry>.js    re-exports the CommonJS module's values, so `require` and `import`
//                          share one instance of the library (no dual-package hazard);
//   dist/esm/**/*.d.ts     the declarations again, read as ES module declarations (the folder is
//                          "type": "module", and their relative imports name files as Node's ESM
//                          resolution needs), so an ESM app under `node16` resolution can follow
//                          them into ESM-only packages such as Nest 12.
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const entries = ['index', 'testing/index', 'admin/index', 'bridge/index'];
const dist = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist');
const esm = join(dist, 'esm');
const require = createRequire(import.meta.url);

const declarations = (dir) =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (path === esm) return [];
    if (statSync(path).isDirectory()) return declarations(path);
    return name.endsWith('.d.ts') ? [path] : [];
  });

/** `./x` as an ES module names it: `./x.js`, or `./x/index.js` for a folder. */
function withExtension(file, specifier) {
  const base = join(dirname(file), specifier);
  if (existsSync(`${base}.d.ts`)) return `${specifier}.js`;
  if (existsSync(join(base, 'index.d.ts'))) return `${specifier}/index.js`;
  throw new Error(`${relative(dist, file)}: cannot resolve ${specifier}`);
}

mkdirSync(esm, { recursive: true });
writeFileSync(join(esm, 'package.json'), '{ "type": "module" }\n');
for (const file of declarations(dist)) {
  const text = readFileSync(file, 'utf8').replace(
    /((?:from |import\()\s*)(['"])(\.\.?\/[^'"]*)\2/g,
    (_, before, quote, specifier) => `${before}${quote}${withExtension(file, specifier)}${quote}`,
  );
  const target = join(esm, relative(dist, file));
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, text);
}

for (const entry of entries) {
  const names = Object.keys(require(join(dist, `${entry}.js`))).filter((n) => n !== '__esModule');
  const target = join(esm, `${entry}.js`);
  const from = relative(dirname(target), join(dist, `${entry}.js`));
  const lines = names.map((name) => `  ${name},`).join('\n');
  writeFileSync(target, `import cjs from '${from}';\n\nexport const {\n${lines}\n} = cjs;\n`);
}
