#!/usr/bin/env bash
# The message brokers the transport suites run against: Debian's nats-server (JetStream) and
# rabbitmq-server. Only the binaries are wanted: test/support/broker-servers.ts starts each
# broker itself, as a private process on free ports in a temporary directory, so a test can
# stop, kill or restart it mid-run. The packages' own system-wide services are therefore kept
# from starting, and anything their postinst scripts started anyway is stopped again.
#
#   .ci/install-brokers.sh        installs whichever of the two is missing (needs root)
#
# Progress goes to stderr. Running it again once both binaries exist does nothing.
set -euo pipefail

log() { echo "[brokers] $*" >&2; }

have_nats() {
  command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] ||
    [ -x /usr/bin/nats-server ]
}

have_rabbitmq() {
  command -v rabbitmq-server >/dev/null 2>&1 || [ -x /usr/sbin/rabbitmq-server ] ||
    [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ]
}

# invoke-rc.d consults /usr/sbin/policy-rc.d before starting a service; exit status 101 means
# "not allowed", so the postinst scripts install the services without starting them. A policy
# file that was already there (a Docker image often ships one) is put back afterwards.
POLICY=/usr/sbin/policy-rc.d
POLICY_BACKUP=/usr/sbin/policy-rc.d.install-brokers
policy_replaced=false

deny_service_starts() {
  if [ -e "$POLICY" ]; then
    mv "$POLICY" "$POLICY_BACKUP"
  fi
  printf '#!/bin/sh\n# Temporary, from .ci/install-brokers.sh: no service starts.\nexit 101\n' \
    >"$POLICY"
  chmod 755 "$POLICY"
  policy_replaced=true
}

allow_service_starts() {
  if [ "$policy_replaced" = true ]; then
    rm -f "$POLICY"
    if [ -e "$POLICY_BACKUP" ]; then
      mv "$POLICY_BACKUP" "$POLICY"
    fi
    policy_replaced=false
  fi
}

# With systemd, or a policy that let a start through, the packages' services may be running
# now, and an earlier `invoke-rc.d rabbitmq-server stop` (a removal or upgrade without this
# policy) runs rabbitmqctl as the rabbitmq user, which leaves an epmd behind. Only processes of
# the packages' own service users are stopped: the test brokers run as the calling user, each
# with a private epmd, and are left alone.
stop_package_services() {
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    systemctl stop rabbitmq-server nats-server epmd.service epmd.socket 2>/dev/null || true
    systemctl disable rabbitmq-server nats-server 2>/dev/null || true
  fi
  local user signal signalled
  for signal in TERM KILL; do
    signalled=false
    for user in rabbitmq nats epmd; do
      # Zombies (stat Z) are dead already; only the machine's init can reap them.
      if id -u "$user" >/dev/null 2>&1 &&
        [ -n "$(ps -u "$user" -o stat= | grep -v '^Z' || true)" ]; then
        log "stopping what runs as the $user user (SIG$signal)"
        pkill "-$signal" -u "$user" 2>/dev/null || true
        signalled=true
      fi
    done
    if [ "$signalled" = false ]; then
      break
    fi
    sleep 1
  done
}

install_packages() {
  local packages=()
  have_nats || packages+=(nats-server)
  have_rabbitmq || packages+=(rabbitmq-server)
  if [ "${#packages[@]}" -eq 0 ]; then
    log "nats-server and rabbitmq-server are already installed"
    return
  fi
  log "installing ${packages[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  deny_service_starts
  trap allow_service_starts EXIT
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${packages[@]}" >&2
  allow_service_starts
  trap - EXIT
  stop_package_services
}

install_packages
have_nats || { log "no nats-server binary after install"; exit 1; }
have_rabbitmq || { log "no rabbitmq-server binary after install"; exit 1; }
nats_bin=$(command -v nats-server || echo /usr/sbin/nats-server)
log "$("$nats_bin" --version 2>&1 | head -n 1)"
rabbit_version=$(dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null || echo 'not from apt')
log "rabbitmq-server $rabbit_version"
