import { handlerRetryDelayMs, resolveHandlerPolicy, type HandlerPolicy } from './handler.policy';
import { InvalidOutboxHandlerPolicyError } from '../outbox.errors';

const defaults: HandlerPolicy = {
  retry: { baseMs: 1000, maxMs: 60_000, jitter: 0.2 },
  maxAttempts: 10,
  ordered: null,
};
const at = { name: 'webhook-sender', location: 'WebhookSender.send' };

describe('resolveHandlerPolicy', () => {
  it("takes the module's policy when the handler sets none", () => {
    expect(resolveHandlerPolicy(at, defaults)).toEqual(defaults);
  });

  it('gives a schedule one attempt more than its delays, unless maxAttempts says otherwise', () => {
    expect(resolveHandlerPolicy({ ...at, retry: [5000, 300_000] }, defaults)).toEqual({
      retry: [5000, 300_000],
      maxAttempts: 3,
      ordered: null,
    });
    expect(
      resolveHandlerPolicy({ ...at, retry: [5000], maxAttempts: 8 }, defaults).maxAttempts,
    ).toBe(8);
  });

  it("fills a partial backoff from the module's", () => {
    expect(resolveHandlerPolicy({ ...at, retry: { baseMs: 50 } }, defaults).retry).toEqual({
      baseMs: 50,
      maxMs: 60_000,
      jitter: 0.2,
    });
  });

  it.each([
    [{ maxAttempts: 0 }, 'maxAttempts', 'an integer from 1'],
    [{ maxAttempts: 2.5 }, 'maxAttempts', 'an integer from 1'],
    [{ retry: [] }, 'retry', 'a non-empty list of delays'],
    [{ retry: [100, -1] }, 'retry', 'a non-empty list of delays'],
    [{ retry: 'fast' }, 'retry', '{ baseMs, maxMs, jitter } or a list of delays'],
    [{ retry: { baseMs: 0 } }, 'retry.baseMs', 'an integer from 1'],
    [{ retry: { jitter: 2 } }, 'retry.jitter', 'a number from 0 to 1'],
    [{ retry: { baseMs: 5000, maxMs: 100 } }, 'retry.maxMs', 'at least retry.baseMs (5000)'],
    [{ ordered: 'yes' }, 'ordered', "true, false or { onDead: 'block' | 'skip' }"],
    [{ ordered: { onDead: 'retry' } }, 'ordered', "true, false or { onDead: 'block' | 'skip' }"],
    [
      { ordered: { ondead: 'skip' } },
      'ordered.ondead',
      "true, false or { onDead: 'block' | 'skip' }",
    ],
    [{ ordered: [] }, 'ordered', "true, false or { onDead: 'block' | 'skip' }"],
  ])('refuses %j, naming %s', (policy, field, expected) => {
    const resolve = () => resolveHandlerPolicy({ ...at, ...policy }, defaults);
    expect(resolve).toThrow(InvalidOutboxHandlerPolicyError);
    expect(resolve).toThrow(`Outbox handler "webhook-sender" on WebhookSender.send has ${field} `);
    expect(resolve).toThrow(expected);
  });
});

describe('resolveHandlerPolicy: ordered', () => {
  it.each([
    [undefined, null],
    [false, null],
    [true, { onDead: 'block' }],
    [{}, { onDead: 'block' }],
    [{ onDead: 'skip' }, { onDead: 'skip' }],
    [{ onDead: 'block' }, { onDead: 'block' }],
  ])('reads ordered: %j as %j', (ordered, expected) => {
    expect(resolveHandlerPolicy({ ...at, ordered }, defaults).ordered).toEqual(expected);
  });
});

describe('handlerRetryDelayMs', () => {
  it('follows a schedule, one delay per failure, the last repeating', () => {
    const policy: HandlerPolicy = {
      retry: [5000, 300_000, 1_800_000],
      maxAttempts: 10,
      ordered: null,
    };
    expect([1, 2, 3, 4, 5].map((failures) => handlerRetryDelayMs(policy, failures))).toEqual([
      5000, 300_000, 1_800_000, 1_800_000, 1_800_000,
    ]);
  });

  it('backs off exponentially without a schedule', () => {
    const policy: HandlerPolicy = {
      retry: { baseMs: 100, maxMs: 1000, jitter: 0 },
      maxAttempts: 9,
      ordered: null,
    };
    expect([1, 2, 3, 4, 5].map((failures) => handlerRetryDelayMs(policy, failures))).toEqual([
      100, 200, 400, 800, 1000,
    ]);
  });
});
