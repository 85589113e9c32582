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

  it('OutboxAdmin.dispatchers() answers what instances() does, typed DispatcherInfo', async () => {
    const listed: outbox.OutboxInstanceInfo[] = [
      {
        id: 'host/1/abc',
        host: 'host',
        pid: 1,
        state: 'running',
        listener: 'listening',
        types: null,
        concurrency: 10,
        inFlight: 0,
        startedAt: new Date(0),
        lastClaimAt: null,
        seenAt: new Date(0),
        reporting: true,
      },
    ];
    const admin = Object.create(outbox.OutboxAdmin.prototype) as outbox.OutboxAdmin;
    const instances = jest.spyOn(admin, 'instances').mockResolvedValue(listed);
    // The old type name is the new one: each is assignable to the other.
    const old: outbox.DispatcherInfo[] = await admin.dispatchers();
    const renamed: outbox.OutboxInstanceInfo[] = old;
    expect(renamed).toBe(listed);
    expect(instances).toHaveBeenCalledTimes(1);
  });
});
