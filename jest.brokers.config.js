// The suites that need real brokers (nats-server with JetStream, rabbitmq-server), started by
// each suite from the installed binaries: `npm run test:brokers`. Kept out of `npm test`, which
// needs nothing but npm; `.ci/run` installs the brokers (.ci/install-brokers.sh) and runs both.
const base = require('./jest.config');

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/brokers/**/*.spec.ts'],
  testPathIgnorePatterns: ['/node_modules/'],
  testTimeout: 120_000,
};
