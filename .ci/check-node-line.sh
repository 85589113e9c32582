#!/usr/bin/env bash
# What can differ from one Node.js line to another, on one more line (the main run is on the
# newest): the packed tarball installed, compiled and run in a Nest 11 CommonJS app and a Nest 12
# ES module app (loading, require(esm), no EBADENGINE), then the suites of the boot and discovery,
# the engine and its shutdown, the LISTEN connection and TLS, the CLI, transactional handlers
# (async context), and the broker clients' connect, give-up and relay paths.
#
#   DATABASE_URL=... .ci/check-node-line.sh 22.15.0
set -euo pipefail
cd "$(dirname "$0")/.."
line=${1:?usage: check-node-line.sh <Node.js version or npm range>}
: "${DATABASE_URL:?check-node-line.sh needs DATABASE_URL}"

SUITES=(
  libs
  test/outbox-module.boot.spec.ts
  test/outbox-module.discovery.spec.ts
  test/outbox-engine.spec.ts
  test/outbox-module.shutdown.spec.ts
  test/pg-listener.spec.ts
  test/outbox-module.listener.spec.ts
  test/outbox-listener-tls.spec.ts
  test/outbox-transactional-handlers.spec.ts
  test/cli.spec.ts
)
# The NATS client's connect and give-up paths; the relay suite on both transports (10,000 events
# each through the NATS client and amqplib: publish, ack or confirm, unroutable, health); the
# reference app's relay; RabbitMQ's consistent-hash routing.
BROKER_SUITES=(
  test/brokers/nats-boot.spec.ts
  test/brokers/relay.spec.ts
  test/brokers/reference-relay.spec.ts
  test/brokers/rabbitmq-consistent-hash.spec.ts
)

bin=$(.ci/fetch-node.sh "$line")
export PATH="$bin:$PATH"
echo "--- Node $(node --version): the package in a Nest 11 CommonJS app and a Nest 12 ESM app"
CONSUMERS="nest11-commonjs nest12-esm" PACKAGE_LINT=0 .ci/check-package.sh
echo "--- Node $(node --version): the suites that can differ by line"
npx jest "${SUITES[@]}"
npx jest -c jest.brokers.config.js "${BROKER_SUITES[@]}"
