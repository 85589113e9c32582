import { fail, ok } from '../outbox.result';
import { OutboxStoreError } from '../../outbox.errors';
import { CLAIM_FUNCTION_LOOK_AGAIN_MS, ClaimFunction } from './claim-function';

describe('ClaimFunction', () => {
  function setUp(answers: ('present' | 'absent' | 'failed')[]) {
    let now = 1_000_000;
    const lookups: number[] = [];
    const choice = new ClaimFunction(
      () => {
        lookups.push(now);
        const answer = answers.shift() ?? 'present';
        return Promise.resolve(
          answer === 'failed'
            ? fail(new OutboxStoreError('claim', 'connection refused', undefined))
            : ok(answer === 'present'),
        );
      },
      () => now,
    );
    return { choice, lookups, advance: (ms: number) => (now += ms) };
  }

  it('looks the function up once, at the first claim, when it is there', async () => {
    const { choice, lookups, advance } = setUp(['present']);
    expect(await choice.use()).toBe(true);
    advance(10 * CLAIM_FUNCTION_LOOK_AGAIN_MS);
    expect(await choice.use()).toBe(true);
    expect(lookups).toHaveLength(1);
  });

  it('claims without it while absent and looks again once a minute has passed', async () => {
    const { choice, lookups, advance } = setUp(['absent', 'absent', 'present']);
    expect(await choice.use()).toBe(false);
    advance(CLAIM_FUNCTION_LOOK_AGAIN_MS - 1);
    expect(await choice.use()).toBe(false);
    expect(lookups).toHaveLength(1);
    advance(1);
    expect(await choice.use()).toBe(false);
    advance(CLAIM_FUNCTION_LOOK_AGAIN_MS);
    expect(await choice.use()).toBe(true);
    expect(lookups).toHaveLength(3);
  });

  it('decides nothing from a failed lookup, and looks again after forget()', async () => {
    const { choice, lookups } = setUp(['failed', 'present', 'absent']);
    expect(await choice.use()).toBe(false);
    expect(await choice.use()).toBe(true);
    choice.forget();
    expect(await choice.use()).toBe(false);
    expect(lookups).toHaveLength(3);
  });
});
