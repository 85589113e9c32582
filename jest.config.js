/** @type {import('jest').Config} */
module.exports = {
  rootDir: '.',
  testEnvironment: 'node',
  moduleFileExtensions: ['ts', 'js', 'json'],
  testMatch: [
    '<rootDir>/libs/**/*.spec.ts',
    '<rootDir>/test/**/*.spec.ts',
    '<rootDir>/apps/**/*.spec.ts',
  ],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json' }] },
  moduleNameMapper: {
    '^@app/outbox$': '<rootDir>/libs/outbox/src',
    '^@app/outbox/(.*)$': '<rootDir>/libs/outbox/src/$1',
  },
  modulePathIgnorePatterns: ['<rootDir>/libs/outbox/dist'],
  // Need real brokers: `npm run test:brokers` (jest.brokers.config.js).
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/brokers/'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  setupFilesAfterEnv: ['<rootDir>/test/support/log-guard.setup.ts'],
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  testTimeout: 60_000,
};
