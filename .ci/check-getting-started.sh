#!/usr/bin/env bash
# docs/getting-started.md, executed as a new user follows it: for each template of the Nest CLI
# (`@nestjs/cli@11 new`: CommonJS and Jest; `@nestjs/cli@12 new`: ES modules and Vitest), a fresh
# app with every default kept (tsconfig, test runner config, TypeORM's migration mode), the packed
# tarball installed with the guide's install line, the guide's files written and its lines added
# to the AppModule (.ci/guide-code.mjs), then `npm run build`, the app started with
# `npm run start:prod` (its health answers ok with the outbox up, and a paid invoice reaches the
# handler), and the app's own `npm test`. No install may warn EBADENGINE.
#
#   DATABASE_URL=... .ci/check-getting-started.sh [11] [12]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
: "${DATABASE_URL:?check-getting-started.sh needs DATABASE_URL (a server where it may create databases)}"
majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(11 12)
scratch=$(mktemp -d)
databases=()
app_pid=

sql() {
  node -e '
    const { Client } = require("pg");
    const client = new Client({ connectionString: process.env.DATABASE_URL });
    client.connect().then(() => client.query(process.argv[1])).finally(() => client.end());
  ' "$1"
}

# SIGTERM to the app's process group (npm and the app), then waits for it.
stop_app() {
  [ -n "$app_pid" ] || return 0
  kill -TERM -- "-$app_pid" 2>/dev/null || true
  wait "$app_pid" 2>/dev/null || true
  app_pid=
}

cleanup() {
  stop_app
  local database
  for database in "${databases[@]}"; do sql "DROP DATABASE IF EXISTS $database WITH (FORCE)" || true; done
  rm -rf "$scratch"
}
trap cleanup EXIT

database_url() {
  node -e 'const url = new URL(process.argv[1]); url.pathname = "/" + process.argv[2]; console.log(url.href)' \
    "$DATABASE_URL" "$1"
}

fresh_database() {
  databases+=("$1")
  sql "DROP DATABASE IF EXISTS $1 WITH (FORCE)"
  sql "CREATE DATABASE $1"
}

packed=$(cd libs/outbox && npm pack --json --pack-destination "$scratch")
tarball="$scratch/$(node -e 'console.log(JSON.parse(process.argv[1])[0].filename)' "$packed")"

# The packages an npm log says refuse this Node (EBADENGINE), one per line.
refused() {
  sed -n "s/^npm warn EBADENGINE *package: '\(.*\)',\$/\1/p" | sort -u
}

# An HTTP request with Node's fetch (no curl on a bare machine): prints the body, fails unless 2xx.
http() {
  node -e '
    fetch(process.argv[2], { method: process.argv[1], signal: AbortSignal.timeout(5000) })
      .then(async (res) => {
        process.stdout.write(await res.text());
        if (!res.ok) process.exit(1);
      })
      .catch(() => process.exit(1));
  ' "$1" "$2"
}

# Polls `url` until it answers; prints the body.
wait_for() {
  local url=$1 deadline=$((SECONDS + 60))
  until http GET "$url"; do
    if [ $SECONDS -ge $deadline ] || ! kill -0 "$app_pid" 2>/dev/null; then
      echo "no answer from $url" >&2
      return 1
    fi
    sleep 0.5
  done
}

for major in "${majors[@]}"; do
  app="$scratch/app$major"
  echo "--- Nest $major: nest new (Node $(node --version))"
  (cd "$scratch" && npx --yes "@nestjs/cli@$major" new "app$major" --package-manager npm --skip-git) \
    >"$scratch/new$major.log" 2>&1 || { cat "$scratch/new$major.log"; exit 1; }
  node -e 'const p = require(process.argv[1]); console.log(`${p.name}: @nestjs/core ${p.dependencies["@nestjs/core"]}, type ${p.type ?? "commonjs"}, test: ${p.scripts.test}`)' \
    "$app/package.json"

  # What the template itself refuses on this Node (its CLI's toolchain may ask for a later
  # minor), so that only what the guide's line brings counts below.
  (cd "$app" && npm install --no-audit --no-fund --loglevel=warn) >"$scratch/template$major.log" 2>&1 ||
    { cat "$scratch/template$major.log"; exit 1; }
  refused <"$scratch/template$major.log" >"$scratch/template$major.refused"
  if [ -s "$scratch/template$major.refused" ]; then
    echo "(the Nest $major template itself refuses Node $(node --version): $(paste -sd' ' "$scratch/template$major.refused"))"
  fi

  line=$(node .ci/guide-code.mjs install "$major")
  echo "--- Nest $major: $line"
  # The guide's line, with the tarball in place of the registry's package.
  read -r -a words <<<"${line/nestjs-lease-outbox /$tarball }"
  (cd "$app" && "${words[@]}" --no-audit --no-fund --loglevel=warn) 2>&1 | tee "$scratch/install$major.log"
  added=$(refused <"$scratch/install$major.log" | grep -vxF -f "$scratch/template$major.refused" || true)
  if [ -n "$added" ]; then
    echo "Nest $major: the guide's install brings packages that refuse Node $(node --version): $added" >&2
    exit 1
  fi

  echo "--- Nest $major: the guide's code"
  node .ci/guide-code.mjs apply "$app" "$major"
  (cd "$app" && npm run build)

  echo "--- Nest $major: npm run start:prod"
  fresh_database "getting_started_$major"
  port=$(node -e "const s = require('net').createServer(); s.listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close(); });")
  # In a process group of its own: npm starts the app as its child, and both must stop.
  (cd "$app" && exec setsid env PORT="$port" DATABASE_URL="$(database_url "getting_started_$major")" \
    npm run start:prod) >"$scratch/app$major.log" 2>&1 &
  app_pid=$!
  health=$(wait_for "http://127.0.0.1:$port/health") || { cat "$scratch/app$major.log"; exit 1; }
  node -e '
    const health = JSON.parse(process.argv[1]);
    if (health.status !== "ok" || health.details.outbox.status !== "up") {
      console.error("health:", process.argv[1]);
      process.exit(1);
    }
    console.log(`health ${health.status}, outbox ${health.details.outbox.status} (${health.details.outbox.state})`);
  ' "$health"
  paid_at=$(date +%s%3N)
  http POST "http://127.0.0.1:$port/invoices/inv-1/pay"
  echo
  # Past one poll interval (30 s), so a missed wake shows as a late delivery, not a failure.
  deadline=$((SECONDS + 45))
  until grep -q 'receipt for invoice inv-1' "$scratch/app$major.log"; do
    if [ $SECONDS -ge $deadline ]; then
      cat "$scratch/app$major.log"
      http GET "http://127.0.0.1:$port/health" || true
      echo
      echo "Nest $major: the handler did not receive invoice.paid" >&2
      exit 1
    fi
    sleep 0.05
  done
  echo "delivered $(($(date +%s%3N) - paid_at)) ms after the POST:" \
    "$(grep -o 'receipt for invoice inv-1.*' "$scratch/app$major.log" | sed 's/\x1b\[[0-9;]*m//g')"
  stop_app


  echo "--- Nest $major: npm test"
  fresh_database "getting_started_${major}_test"
  (cd "$app" && DATABASE_URL="$(database_url "getting_started_${major}_test")" npm test)
done
echo "getting started: Nest ${majors[*]} built, ran and passed their tests"
cd "$root"
