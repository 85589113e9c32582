// Reads docs/getting-started.md and does what it tells a reader to do in an app the Nest CLI made,
// with nothing of its own: the guide is the only source of the code.
//
//   node .ci/guide-code.mjs install <nest major>           prints the guide's install line
//   node .ci/guide-code.mjs apply <app dir> <nest major>   writes the guide's files into the app
//                                                          and adds its lines to src/app.module.ts
//
// A block of the guide that starts with `// src/<path>` is that file, whole; the one that starts
// with `// src/app.module.ts (the lines to add)` holds the imports and the `imports` entries to
// add to the generated AppModule. For Nest 11 (CommonJS) the relative imports lose their `.js`,
// as the guide says.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const GUIDE = join(dirname(fileURLToPath(import.meta.url)), '..', 'docs', 'getting-started.md');
const ADDITIONS = '// src/app.module.ts (the lines to add)';

function blocks(language) {
  const text = readFileSync(GUIDE, 'utf8');
  const found = [];
  const fence = new RegExp('^```' + language + '\\n([\\s\\S]*?)^```$', 'gm');
  for (const match of text.matchAll(fence)) found.push(match[1]);
  return found;
}

function fail(message) {
  console.error(`guide-code: ${message}`);
  process.exit(1);
}

function install(major) {
  const block = blocks('sh').find((b) => b.startsWith(`# Nest ${major}\n`));
  if (!block) fail(`no "# Nest ${major}" install block in ${GUIDE}`);
  const line = block.split('\n')[1];
  if (!line.startsWith('npm install ')) fail(`the Nest ${major} block is not an npm install line`);
  console.log(line);
}

const commonJs = (code) => code.replace(/(from '\.{1,2}\/[^']*)\.js'/g, "$1'");

function apply(app, major) {
  const adapt = major === '11' ? commonJs : (code) => code;
  let additions;
  const written = [];
  for (const block of blocks('ts')) {
    const first = block.split('\n', 1)[0];
    if (first === ADDITIONS) {
      additions = block;
      continue;
    }
    const path = /^\/\/ (src\/\S+\.ts)$/.exec(first)?.[1];
    if (!path) continue;
    mkdirSync(dirname(join(app, path)), { recursive: true });
    writeFileSync(join(app, path), adapt(block.split('\n').slice(1).join('\n')));
    written.push(path);
  }
  if (!additions) fail(`no "${ADDITIONS}" block in ${GUIDE}`);

  // The imports of the block go after the module's own; its `imports` entries go first in the
  // AppModule's `imports` array.
  const lines = adapt(additions).split('\n').slice(1);
  const importLines = lines.filter((line) => line.startsWith('import '));
  const start = lines.findIndex((line) => line.trim() === 'imports: [');
  const end = lines.findIndex((line, i) => i > start && line.trim() === '],');
  if (start < 0 || end < 0) fail('the AppModule block has no `imports: [ ... ],`');
  const entries = lines.slice(start + 1, end).map((line) => line.trim());

  const modulePath = join(app, 'src', 'app.module.ts');
  let source = readFileSync(modulePath, 'utf8');
  const lastImport = [...source.matchAll(/^import [^;]*;$/gm)].at(-1);
  if (!lastImport) fail(`${modulePath} has no import`);
  const at = lastImport.index + lastImport[0].length;
  source = `${source.slice(0, at)}\n${importLines.join('\n')}${source.slice(at)}`;
  if (/imports: \[/.test(source)) {
    source = source.replace(/imports: \[/, `imports: [\n    ${entries.join('\n    ')}`);
  } else {
    source = source.replace(
      /@Module\(\{/,
      `@Module({\n  imports: [\n    ${entries.join('\n    ')}\n  ],`,
    );
  }
  writeFileSync(modulePath, source);
  console.log(`wrote ${written.join(', ')}; added ${entries.length} imports to src/app.module.ts`);
}

const [command, ...args] = process.argv.slice(2);
if (command === 'install' && args.length === 1) install(args[0]);
else if (command === 'apply' && args.length === 2) apply(args[0], args[1]);
else fail('usage: guide-code.mjs install <major> | apply <app dir> <major>');
