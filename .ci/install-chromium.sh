#!/usr/bin/env bash
# Debian's Chromium, for the dashboard's browser test (playwright-core drives it; Playwright's own
# browser downloads are not reachable here). Does nothing when a Chromium is already installed.
set -euo pipefail

for candidate in "${CHROMIUM_PATH:-}" /usr/bin/chromium /usr/bin/chromium-browser; do
  if [ -n "$candidate" ] && [ -x "$candidate" ]; then
    echo "[chromium] $("$candidate" --version 2>/dev/null || echo "$candidate")"
    exit 0
  fi
done
echo "[chromium] installing Debian's chromium with apt-get"
export DEBIAN_FRONTEND=noninteractive
# The package lists may be stale on a fresh machine; the PostgreSQL stage updates them too.
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
/usr/bin/chromium --version
