#!/usr/bin/env bash
# Packs the library as `npm publish` would (prepack builds it) and checks it as its users meet it:
#   - the tarball: compiled entry points, their declarations, README and LICENSE; no sources,
#     tests or source maps;
#   - its types and exports, with @arethetypeswrong/cli (CommonJS and ESM apps under node10,
#     node16 and bundler resolution) and publint;
#   - fresh apps install the tarball with a plain `npm install` next to the current companions,
#     compile with `skipLibCheck: false` and run the README's example on a real PostgreSQL
#     ($DATABASE_URL: a database is created for each app), with the package's command
#     (`npx nestjs-lease-outbox`) applying the migrations before and reporting the state after:
#       test/consumers/nest11-commonjs    Nest 11, TypeORM 1, CommonJS, no Terminus or schedule;
#       test/consumers/nest11-companions  the same with @nestjs/terminus 12 and @nestjs/schedule 12;
#       test/consumers/nest12-esm         Nest 12, TypeORM 0.3, an ES module app, with both.
#   - no install warns EBADENGINE: every package the apps install accepts the Node.js it runs on.
#
# CONSUMERS (a space-separated list of the apps above, default all three) and PACKAGE_LINT=0
# (skip attw and publint, which do not depend on the Node.js line) let another line repeat only
# what can differ there.
set -euo pipefail
CONSUMERS=${CONSUMERS:-nest11-commonjs nest11-companions nest12-esm}
PACKAGE_LINT=${PACKAGE_LINT:-1}
cd "$(dirname "$0")/.."
root=$PWD
: "${DATABASE_URL:?check-package.sh needs DATABASE_URL (a server where it may create databases)}"
scratch=$(mktemp -d)
databases=()

# The scratch directory and every consumer database go, whatever the outcome.
cleanup() {
  local database
  for database in "${databases[@]}"; do
    psql_url=$DATABASE_URL node -e '
      const { Client } = require("pg");
      const client = new Client({ connectionString: process.env.psql_url });
      client.connect()
        .then(() => client.query(`DROP DATABASE IF EXISTS ${process.argv[1]} WITH (FORCE)`))
        .finally(() => client.end());
    ' "$database" || true
  done
  rm -rf "$scratch"
}
trap cleanup EXIT

# The file name from npm's JSON report: its plain output also carries what prepack prints.
packed=$(cd libs/outbox && npm pack --json --pack-destination "$scratch")
tarball="$scratch/$(node -e 'console.log(JSON.parse(process.argv[1])[0].filename)' "$packed")"
mkdir "$scratch/unpacked"
tar -xzf "$tarball" -C "$scratch/unpacked"
node - "$scratch/unpacked/package" <<'JS'
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
const needed = ['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md', 'dist/index.js', 'dist/index.d.ts', 'dist/admin/cli/main.js'];
const entries = ['index', 'testing/index', 'admin/index', 'bridge/index'];
for (const file of [...needed, ...entries.flatMap((e) => [`dist/${e}.js`, `dist/esm/${e}.js`, `dist/esm/${e}.d.ts`])]) {
  if (!files.includes(file)) problems.push(`missing ${file}`);
}
for (const file of files) {
  if (/\.map$|\.spec\.|^src\/|\.ts$/.test(file) && !file.endsWith('.d.ts')) {
    problems.push(`should not ship ${file}`);
  }
}
const bin = require(join(dir, 'package.json')).bin?.['nestjs-lease-outbox'];
if (bin !== './dist/admin/cli/main.js') problems.push(`bin nestjs-lease-outbox is ${bin}`);
else if (!require('node:fs').readFileSync(join(dir, bin), 'utf8').startsWith('#!/usr/bin/env node\n')) {
  problems.push(`${bin} does not start with a node shebang`);
}
if (problems.length > 0) {
  console.error(`package check failed:\n  ${problems.join('\n  ')}`);
  process.exit(1);
}
console.log(`package: ${files.length} files`);
JS

if [ "$PACKAGE_LINT" = 1 ]; then
  npx attw --no-color "$tarball"
  npx publint run "$tarball" --strict
fi

# Loads the package's root entry (argv[1]: require or import) and fails on any add-on module it
# brought with it; CommonJS modules that an import loads are in the same require.cache.
ROOT_ENTRY_CHECK='
const how = process.argv[1];
const { createRequire } = process.getBuiltinModule("node:module");
const local = createRequire(process.cwd() + "/");
(how === "import" ? import("nestjs-lease-outbox") : Promise.resolve(local("nestjs-lease-outbox"))).then(() => {
  const loaded = Object.keys(local.cache);
  const addOns = loaded.filter((f) =>
    /\/nestjs-lease-outbox\/dist\/(esm\/)?(bridge|admin\/(dashboard|cli))\/|\/node_modules\/(amqplib|@nats-io\/[^/]+|commander)\//.test(f));
  if (!loaded.some((f) => /\/nestjs-lease-outbox\/dist\/index\.js$/.test(f))) throw new Error("the root entry was not loaded");
  if (addOns.length > 0) throw new Error(`the root entry (${how}) loaded add-ons: ${addOns.join(", ")}`);
  console.log(`root entry (${how}): ${loaded.length} modules, no add-on`);
});
'

database_url() {
  node -e 'const url = new URL(process.argv[1]); url.pathname = "/" + process.argv[2]; console.log(url.href)' \
    "$DATABASE_URL" "$1"
}

# Copies a consumer app, installs the tarball into it, type-checks it under each of the given
# module/moduleResolution pairs (the first one also emits) and runs it on a database of its own.
consumer() {
  local name=$1 app="$scratch/$1" database="consumer_${1//-/_}"
  shift
  databases+=("$database")
  cp -r "test/consumers/$name" "$app"
  cp test/consumers/shared/example.ts "$app/src/"
  if grep -q '"@nestjs/terminus"' "$app/package.json"; then
    cp test/consumers/shared/companions.ts "$app/src/"
  fi
  echo "--- $name: npm install (Node $(node --version))"
  (cd "$app" && npm install --no-audit --no-fund --loglevel=warn "$tarball") 2>&1 | tee "$app.install.log"
  if grep -q EBADENGINE "$app.install.log"; then
    echo "$name: a package refuses Node $(node --version) (EBADENGINE above)" >&2
    exit 1
  fi
  (cd "$app" && node -e '
    const pkg = require("nestjs-lease-outbox/package.json");
    const nest = require("@nestjs/core/package.json");
    console.log(`installed ${pkg.name} ${pkg.version} with @nestjs/core ${nest.version}`);
  ')
  # The root entry is the outbox alone, whether the app requires or imports it.
  echo "--- $name: what the root entry loads"
  (cd "$app" && node -e "$ROOT_ENTRY_CHECK" require && node --input-type=module -e "$ROOT_ENTRY_CHECK" import)
  local emit=1 pair
  for pair in "$@"; do
    echo "--- $name: tsc --module ${pair% *} --moduleResolution ${pair#* }"
    (cd "$app" && npx tsc -p . --module "${pair% *}" --moduleResolution "${pair#* }" \
      $([ "$emit" -eq 1 ] || echo --noEmit))
    emit=0
  done
  psql_url=$DATABASE_URL node -e '
    const { Client } = require("pg");
    const client = new Client({ connectionString: process.env.psql_url });
    client.connect()
      .then(() => client.query(`DROP DATABASE IF EXISTS ${process.argv[1]}`))
      .then(() => client.query(`CREATE DATABASE ${process.argv[1]}`))
      .finally(() => client.end());
  ' "$database"
  # The package's command, as an operator runs it: the migrations first (the app's own
  # migrationsRun then finds them applied), the state after the example.
  echo "--- $name: npx nestjs-lease-outbox migrate"
  (cd "$app" && DATABASE_URL=$(database_url "$database") timeout 60 npx --no-install nestjs-lease-outbox migrate)
  echo "--- $name: run"
  (cd "$app" && DATABASE_URL=$(database_url "$database") timeout 60 node dist/main.js)
  echo "--- $name: npx nestjs-lease-outbox status --fail-on-dead"
  (cd "$app" && DATABASE_URL=$(database_url "$database") timeout 60 npx --no-install nestjs-lease-outbox status --fail-on-dead)
}

for app in $CONSUMERS; do
  case "$app" in
    nest11-commonjs)
      consumer nest11-commonjs "nodenext nodenext" "commonjs node10"
      for optional in @nestjs/terminus @nestjs/schedule; do
        if [ -e "$scratch/nest11-commonjs/node_modules/$optional" ]; then
          echo "$optional was installed into an app that did not ask for it" >&2
          exit 1
        fi
      done
      ;;
    nest11-companions) consumer nest11-companions "nodenext nodenext" ;;
    nest12-esm) consumer nest12-esm "node16 node16" "nodenext nodenext" "esnext bundler" ;;
    *) echo "no consumer app $app" >&2; exit 2 ;;
  esac
done
