#!/usr/bin/env bash
# The library's suites again on the other framework line: Nest 12 (ESM-only packages) with
# TypeORM 0.3 at the lowest version the package accepts, installed over a temporary copy of the
# repository. Jest loads Nest 12 from the CommonJS test files only through its require(esm)
# support, which needs Node >= 24.9, so this stage runs on the newest Node 24 (the consumer apps
# of check-package.sh prove Nest 12 on every line CI runs).
#
#   DATABASE_URL=... .ci/check-nest12.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?check-nest12.sh needs DATABASE_URL}"
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT

NEST12=(
  @nestjs/common@^12 @nestjs/core@^12 @nestjs/platform-express@^12 @nestjs/testing@^12
  @nestjs/schedule@^12 @nestjs/terminus@^12 @nestjs/typeorm@^12 typeorm@0.3.20
)

node24=$(.ci/fetch-node.sh ^24.9)

echo "--- a copy of the repository with Nest 12 and TypeORM 0.3.20"
mkdir "$copy/repo"
tar --exclude=./node_modules --exclude=./.git --exclude='*/dist' --exclude=./.data -cf - . |
  tar -xf - -C "$copy/repo"
cd "$copy/repo"
npm ci --no-audit --no-fund --loglevel=error
# @nestjs-cls/transactional (an optional peer, used by the CLS tests) still requires nestjs-cls 6,
# which declares Nest 11 at most: peers are not enforced for this copy.
npm install --no-save --no-audit --no-fund --loglevel=error --legacy-peer-deps "${NEST12[@]}"
for name in @nestjs/core @nestjs/typeorm typeorm; do
  echo "$name $(node -p "JSON.parse(require('fs').readFileSync('node_modules/$name/package.json')).version")"
done

echo "--- library suites on Node $("$node24/node" --version)"
PATH="$node24:$PATH" NODE_OPTIONS="--experimental-vm-modules --no-warnings" \
  npx jest libs test --testPathIgnorePatterns /test/app/ /test/faults/
