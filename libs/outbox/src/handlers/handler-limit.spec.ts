import { InvalidOutboxHandlerLimitError } from '../outbox.errors';
import { resolveHandlerLimit } from './handler-limit';

const handler = { name: 'webhook', location: 'Hooks.send' };

describe('resolveHandlerLimit', () => {
  it('is null for a handler without a limit', () => {
    expect(resolveHandlerLimit(handler)).toBeNull();
  });

  it('resolves maxConcurrent, rate and limitPerPartition', () => {
    expect(
      resolveHandlerLimit({
        ...handler,
        maxConcurrent: 5,
        rate: { limit: 10, perMs: 1000 },
        limitPerPartition: true,
      }),
    ).toEqual({ maxConcurrent: 5, rate: { limit: 10, perMs: 1000 }, perPartition: true });
    expect(resolveHandlerLimit({ ...handler, rate: { limit: 1, perMs: 60_000 } })).toEqual({
      maxConcurrent: null,
      rate: { limit: 1, perMs: 60_000 },
      perPartition: false,
    });
  });

  it.each<[string, Record<string, unknown>, string, string]>([
    ['maxConcurrent 0', { maxConcurrent: 0 }, 'maxConcurrent', 'an integer from 1 to 10000'],
    ['maxConcurrent 1.5', { maxConcurrent: 1.5 }, 'maxConcurrent', 'an integer from 1 to 10000'],
    ['maxConcurrent as text', { maxConcurrent: '3' }, 'maxConcurrent', 'an integer from 1'],
    ['rate as a number', { rate: 10 }, 'rate', '{ limit, perMs }'],
    ['rate without perMs', { rate: { limit: 10 } }, 'rate.perMs', 'an integer from 1'],
    ['rate with limit 0', { rate: { limit: 0, perMs: 1000 } }, 'rate.limit', 'an integer from 1'],
    [
      'rate with an unknown key',
      { rate: { limit: 1, perMs: 1000, burst: 5 } },
      'rate.burst',
      'absent',
    ],
    ['a window over a day', { rate: { limit: 1, perMs: 86_400_001 } }, 'rate.perMs', 'to 86400000'],
    [
      'limitPerPartition as text',
      { maxConcurrent: 1, limitPerPartition: 'yes' },
      'limitPerPartition',
      'true or false',
    ],
    [
      'limitPerPartition alone',
      { limitPerPartition: true },
      'limitPerPartition',
      'set with maxConcurrent or rate',
    ],
  ])('refuses %s, naming the field and the value', (_case, limit, field, expected) => {
    let error: unknown;
    try {
      resolveHandlerLimit({ ...handler, ...limit });
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(InvalidOutboxHandlerLimitError);
    const refused = error as InvalidOutboxHandlerLimitError;
    expect(refused.field).toBe(field);
    expect(refused.message).toContain(`"webhook" on Hooks.send has the limit ${field}`);
    expect(refused.message).toContain(expected);
  });
});
