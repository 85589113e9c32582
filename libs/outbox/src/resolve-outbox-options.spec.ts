import { InvalidOutboxOptionsError } from './outbox.errors';
import { deprecatedTuningFields, resolveOutboxOptions } from './resolve-outbox-options';

describe('resolveOutboxOptions', () => {
  it('applies every documented default', () => {
    expect(resolveOutboxOptions({})).toMatchObject({
      leaseMs: 60_000,
      handlerTimeoutMs: 10_000,
      concurrency: 20,
      maxAttempts: 10,
      retry: { baseMs: 1000, maxMs: 300_000, jitter: 0.2 },
      deadRetryMs: 21_600_000,
      shutdownGraceMs: 10_000,
      listen: {
        enabled: true,
        channel: 'outbox_event',
        connectTimeoutMs: 5000,
        queryTimeoutMs: 2000,
        probeIntervalMs: 2000,
        reconnectMinMs: 250,
        reconnectMaxMs: 15_000,
      },
      retention: {
        enabled: true,
        retentionMs: 604_800_000,
        sweepIntervalMs: 600_000,
        batchSize: 1000,
        discardedRetentionMs: 2_592_000_000,
      },
      tuning: {
        batchSize: 250,
        statementTimeoutMs: 5000,
        lockTimeoutMs: 2000,
        pollIntervalMs: 30_000,
        idleFloorMs: 50,
        failedDrainRetryMs: 1000,
        wakeCoalesceMs: 0,
        localQueue: { size: 500, ttlMs: 5000 },
      },
      liveness: { eventLoopStallMs: 5000, eventLoopWindowMs: 10_000, overdueSlotsMs: 60_000 },
      autoStart: true,
    });
    expect(resolveOutboxOptions().types).toBeUndefined();
  });

  it('keeps nested defaults when only part of a group is given', () => {
    const options = resolveOutboxOptions({ listen: { enabled: false }, retry: { baseMs: 50 } });
    expect(options.listen).toMatchObject({
      enabled: false,
      channel: 'outbox_event',
      probeIntervalMs: 2000,
    });
    expect(options.retry).toMatchObject({ baseMs: 50, maxMs: 300_000 });
  });

  it('names every bad field and its value in one error', () => {
    let error: unknown;
    try {
      resolveOutboxOptions({
        leaseMs: -5,
        concurrency: 1.5,
        listen: { channel: 'Bad Channel!' },
        retention: { batchSize: 0 },
        types: [],
        leaseMS: 1,
      } as never);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InvalidOutboxOptionsError);
    const { problems, message } = error as InvalidOutboxOptionsError;
    expect(problems.map((p) => p.path).sort()).toEqual(
      [
        'concurrency',
        'leaseMS',
        'leaseMs',
        'listen.channel',
        'retention.batchSize',
        'types',
      ].sort(),
    );
    expect(message).toContain('leaseMs = -5: leaseMs must not be less than 1000');
    expect(message).toContain('concurrency = 1.5: concurrency must be an integer number');
    expect(message).toContain('listen.channel = "Bad Channel!"');
    expect(message).toContain('leaseMS = 1: property leaseMS should not exist');
  });

  it('takes numbers and booleans written as text, as the environment gives them', () => {
    const options = resolveOutboxOptions({
      maxAttempts: '5',
      leaseMs: ' 30000 ',
      retry: { jitter: '0.5' },
      listen: { enabled: 'false' },
      autoStart: 'TRUE',
    } as never);
    expect(options).toMatchObject({
      maxAttempts: 5,
      leaseMs: 30_000,
      retry: { jitter: 0.5 },
      listen: { enabled: false },
      autoStart: true,
    });
  });

  it('says a number was expected for text that is not one', () => {
    expect(() => resolveOutboxOptions({ maxAttempts: 'ten', autoStart: 'yes' } as never)).toThrow(
      '  - maxAttempts = "ten": maxAttempts must be a number; text is taken only when it reads as one, such as "5"\n' +
        '  - autoStart = "yes": autoStart must be a boolean value',
    );
  });

  it('takes deadRetryMs 0 (no automatic replay) or at least 1000, also by type, naming the type', () => {
    expect(
      resolveOutboxOptions({ deadRetryMs: 0, deadRetryByType: { 'invoice.paid': 60_000, x: 0 } }),
    ).toMatchObject({ deadRetryMs: 0, deadRetryByType: { 'invoice.paid': 60_000, x: 0 } });
    const error = (() => {
      try {
        resolveOutboxOptions({
          deadRetryMs: 500,
          deadRetryByType: { 'invoice.paid': 999, 'member.invited': '1h' as never },
        });
      } catch (e) {
        return e as InvalidOutboxOptionsError;
      }
    })();
    expect(error).toBeInstanceOf(InvalidOutboxOptionsError);
    expect(error!.message).toContain(
      'deadRetryMs must be 0 (no automatic replay) or an integer of at least 1000',
    );
    expect(error!.message).toContain('deadRetryByType.invoice.paid');
    expect(error!.message).toContain('deadRetryByType.member.invited');
  });

  it('requires the lease to cover the handler budget plus settle headroom', () => {
    expect(() => resolveOutboxOptions({ leaseMs: 10_000, handlerTimeoutMs: 9_500 })).toThrow(
      'leaseMs = 10000: leaseMs must cover handlerTimeoutMs (9500) plus 1000 ms to settle',
    );
    expect(resolveOutboxOptions({ leaseMs: 10_000, handlerTimeoutMs: 9_000 }).leaseMs).toBe(10_000);
  });

  it('refuses ranges that cannot hold', () => {
    expect(() => resolveOutboxOptions({ retry: { baseMs: 5000, maxMs: 10 } })).toThrow(
      'retry.maxMs = 10: retry.maxMs must be at least retry.baseMs (5000)',
    );
    expect(() =>
      resolveOutboxOptions({ listen: { reconnectMinMs: 500, reconnectMaxMs: 100 } }),
    ).toThrow('listen.reconnectMaxMs = 100');
  });

  it('never shows a password from a bad connection string', () => {
    expect(() =>
      resolveOutboxOptions({
        listen: { connectionString: 'postgres://u:pw-secret@h/db', bogus: 1 } as never,
      }),
    ).toThrow(/listen\.bogus/);
    let message = '';
    try {
      resolveOutboxOptions({ listen: { connectionString: 42 as never } });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toContain('listen.connectionString = 42');
    try {
      resolveOutboxOptions({
        listen: { connectionString: 'postgres://u:pw-secret@h/db', channel: '' },
      });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).not.toContain('pw-secret');
  });

  it('refuses timer delays Node would cut to 1 ms, but not long SQL intervals', () => {
    expect(() => resolveOutboxOptions({ tuning: { pollIntervalMs: 3e9 } })).toThrow(
      'tuning.pollIntervalMs = 3000000000: pollIntervalMs must not be greater than 2147483647',
    );
    expect(() => resolveOutboxOptions({ leaseMs: 3e9, handlerTimeoutMs: 2.9e9 })).toThrow(
      'handlerTimeoutMs = 2900000000',
    );
    expect(
      resolveOutboxOptions({ retention: { retentionMs: 90 * 86_400_000 } }).retention.retentionMs,
    ).toBe(7_776_000_000);
  });

  it('names each liveness bound that is out of range, with its value', () => {
    let message = '';
    try {
      resolveOutboxOptions({
        liveness: { eventLoopStallMs: 50, eventLoopWindowMs: 3_600_000, overdueSlotsMs: 'soon' },
      } as never);
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toContain(
      'liveness.eventLoopStallMs = 50: eventLoopStallMs must not be less than 100',
    );
    expect(message).toContain(
      'liveness.eventLoopWindowMs = 3600000: eventLoopWindowMs must not be greater than 600000',
    );
    expect(message).toContain(
      'liveness.overdueSlotsMs = "soon": liveness.overdueSlotsMs must be a number',
    );
    expect(
      resolveOutboxOptions({ liveness: { eventLoopStallMs: '250' } } as never).liveness,
    ).toEqual({ eventLoopStallMs: 250, eventLoopWindowMs: 10_000, overdueSlotsMs: 60_000 });
  });

  describe('the tuning knobs once set at the top level', () => {
    it('reads each one as its field of tuning, and leaves no top-level copy', () => {
      const options = resolveOutboxOptions({
        batchSize: '40',
        statementTimeoutMs: 1500,
        localQueue: { size: 0 },
        tuning: { pollIntervalMs: 500 },
      } as never);
      expect(options.tuning).toMatchObject({
        batchSize: 40,
        statementTimeoutMs: 1500,
        pollIntervalMs: 500,
        lockTimeoutMs: 2000,
        localQueue: { size: 0, ttlMs: 5000 },
      });
      expect(Object.keys(options)).not.toEqual(
        expect.arrayContaining(['batchSize', 'statementTimeoutMs', 'localQueue']),
      );
      expect(Object.keys(options).filter((key) => key in options.tuning)).toEqual([]);
    });

    it('names them for the deprecation warning', () => {
      expect(deprecatedTuningFields({ wakeCoalesceMs: 5, batchSize: 10, concurrency: 4 })).toEqual([
        'batchSize',
        'wakeCoalesceMs',
      ]);
      expect(deprecatedTuningFields({ tuning: { batchSize: 10 } })).toEqual([]);
      expect(deprecatedTuningFields(undefined)).toEqual([]);
    });

    it('checks one as it checks its field of tuning, under the name it was given', () => {
      expect(() => resolveOutboxOptions({ pollIntervalMs: 3e9 })).toThrow(
        'pollIntervalMs = 3000000000: pollIntervalMs must not be greater than 2147483647',
      );
      expect(() => resolveOutboxOptions({ localQueue: { size: -1 } })).toThrow(
        'localQueue.size = -1',
      );
      expect(() => resolveOutboxOptions({ batchSize: 10, tuning: 'fast' } as never)).toThrow(
        'tuning = "fast"',
      );
    });

    it('refuses one set in both places, rather than ignore either', () => {
      expect(() =>
        resolveOutboxOptions({ batchSize: 10, tuning: { batchSize: 20, idleFloorMs: 5 } }),
      ).toThrow(
        'batchSize = 10: batchSize is also set as tuning.batchSize; set tuning.batchSize alone',
      );
      expect(
        resolveOutboxOptions({ batchSize: 10, tuning: { idleFloorMs: 5 } }).tuning,
      ).toMatchObject({ batchSize: 10, idleFloorMs: 5 });
    });
  });
});
