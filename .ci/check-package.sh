#!/usr/bin/env bash
# Packs the library as `npm publish` would (prepack builds it) and checks the tarball: the compiled
# entry point and its types, the README and the LICENSE are in it; sources, tests and source maps
# are not; and the packed entry point loads (its peers taken from this repository's install).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

tarball=$(cd libs/outbox && npm pack --silent --pack-destination "$scratch")
tar -xzf "$scratch/$tarball" -C "$scratch"
node - "$scratch/package" <<'JS'
const { readdirSync, statSync } = require('node:fs');
const { join, relative } = require('node:path');
const dir = process.argv[2];
const files = [];
const walk = (d) =>
  readdirSync(d).forEach((name) => {
    const path = join(d, name);
    if (statSync(path).isDirectory()) walk(path);
    else files.push(relative(dir, path));
  });
walk(dir);
const problems = [];
for (const needed of ['package.json', 'README.md', 'LICENSE', 'dist/index.js', 'dist/index.d.ts']) {
  if (!files.includes(needed)) problems.push(`missing ${needed}`);
}
for (const file of files) {
  if (/\.map$|\.spec\.|^src\/|\.ts$/.test(file) && !file.endsWith('.d.ts')) {
    problems.push(`should not ship ${file}`);
  }
}
if (problems.length > 0) {
  console.error(`package check failed:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log(`package: ${files.length} files, ${files.filter((f) => f.startsWith('dist/')).length} in dist/`);
JS
NODE_PATH="$root/node_modules" node -e "
  const outbox = require('$scratch/package');
  for (const name of ['OutboxModule', 'OutboxPublisher', 'OnOutboxEvent', 'OUTBOX_MIGRATIONS']) {
    if (!outbox[name]) { console.error('the packed entry point lacks ' + name); process.exit(1); }
  }
  console.log('packed entry point loads: ' + Object.keys(outbox).length + ' exports');
"
