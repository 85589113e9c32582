#!/usr/bin/env bash
# A throwaway PgBouncer in transaction mode in front of the CI PostgreSQL, so the suites that
# cover emit, claim, settle, transactional handlers, OutboxAdmin and the CLI are proven behind a
# transaction pooler (TypeORM through it, LISTEN direct, as the README recommends).
#
#   .ci/start-pgbouncer.sh install              the Debian package (needs root)
#   .ci/start-pgbouncer.sh start <server-url>   prints a directory; its `url` file holds the
#                                               pooler's URL (database `postgres`, same user)
#   .ci/start-pgbouncer.sh stop <dir>           stops that PgBouncer and removes the directory
#
# Every database of the server is reachable through it (a `*` entry), so the per-file copies
# the test harness creates directly on the server are served too. Logs go to stderr so
# `dir=$(... start URL)` captures only the directory; PgBouncer's own log is `pgbouncer.log`.
set -euo pipefail

log() { echo "[pgbouncer] $*" >&2; }

# PgBouncer refuses to run as root; the postgres OS user exists once PostgreSQL 15 is installed.
as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

install_pgbouncer() {
  if ! command -v pgbouncer >/dev/null 2>&1; then
    log "installing PgBouncer with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends pgbouncer >&2
  fi
  # The package starts a system-wide instance on 6432 where systemd runs; nothing here uses it.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet pgbouncer 2>/dev/null; then
    systemctl stop pgbouncer || true
  fi
  log "$(pgbouncer --version | head -n 1)"
}

free_port() {
  node -e "const s = require('net').createServer(); s.listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close(); });"
}

start_pgbouncer() {
  local server_url=${1:?usage: start <server-url>}
  command -v pgbouncer >/dev/null 2>&1 || install_pgbouncer
  local dir port server_host server_port user
  dir=$(mktemp -d "${TMPDIR:-/tmp}/outbox-pgbouncer.XXXXXX")
  port=$(free_port)
  server_host=$(node -e "console.log(new URL(process.argv[1]).hostname)" "$server_url")
  server_port=$(node -e "console.log(new URL(process.argv[1]).port || '5432')" "$server_url")
  user=$(node -e "console.log(decodeURIComponent(new URL(process.argv[1]).username))" "$server_url")

  # The CI server trusts 127.0.0.1, so PgBouncer trusts its clients too (it listens on 127.0.0.1
  # only) and logs in to the server as the client's user without a password.
  printf '"%s" ""\n' "$user" >"$dir/userlist.txt"
  cat >"$dir/pgbouncer.ini" <<EOF
[databases]
* = host=$server_host port=$server_port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
; One pool per database: a file's TypeORM pool (10), its app's pool and the CLI's, with room.
default_pool_size = 20
max_client_conn = 400
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
  if [ "$(id -u)" -eq 0 ]; then
    chown -R postgres: "$dir"
  fi
  if ! as_postgres pgbouncer -d -q "$dir/pgbouncer.ini"; then
    cat "$dir/pgbouncer.log" >&2 || true
    exit 1
  fi
  local tries=0
  until node -e "require('net').connect($port, '127.0.0.1').on('connect', () => process.exit(0)).on('error', () => process.exit(1))"; do
    tries=$((tries + 1))
    if [ "$tries" -ge 50 ]; then
      log "no PgBouncer listening on 127.0.0.1:$port"
      cat "$dir/pgbouncer.log" >&2 || true
      exit 1
    fi
    sleep 0.1
  done

  local url
  url=$(node -e "const u = new URL(process.argv[1]); u.host = '127.0.0.1:' + process.argv[2]; u.pathname = '/postgres'; console.log(u.toString())" "$server_url" "$port")
  echo "$url" >"$dir/url"
  log "$(pgbouncer --version | head -n 1) (pool_mode transaction) on 127.0.0.1:$port for $server_host:$server_port, in $dir"
  echo "$dir"
}

stop_pgbouncer() {
  local dir=${1:?usage: stop <dir>}
  if [ -f "$dir/pgbouncer.pid" ]; then
    kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true
    local tries=0
    while [ -f "$dir/pgbouncer.pid" ] && [ "$tries" -lt 50 ]; do
      tries=$((tries + 1))
      sleep 0.1
    done
  fi
  rm -rf "$dir"
  log "stopped and removed $dir"
}

case "${1:-}" in
  install) install_pgbouncer ;;
  start) start_pgbouncer "${2:-}" ;;
  stop) stop_pgbouncer "${2:-}" ;;
  *)
    echo "usage: $0 install | start <server-url> | stop <dir>" >&2
    exit 2
    ;;
esac
