import * as outbox from './index';

describe('deprecated names', () => {
  it.each([
    ['OutboxDispatcher', 'OutboxEngine'],
    ['OutboxRepository', 'OutboxLeaseStore'],
  ] as const)(
    '%s is the same class as %s, so injection by the old name still works',
    (old, renamed) => {
      expect(outbox[old]).toBe(outbox[renamed]);
    },
  );
});
