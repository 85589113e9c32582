import { fail, ok } from '../outbox.result';
import { OutboxStoreError } from '../../outbox.errors';
import { CLAIM_FUNCTION_LOOK_AGAIN_MS, ClaimFunction, type ClaimFunctions } from './claim-function';

type Answer = 'both' | 'chained' | 'none' | 'failed';

describe('ClaimFunction', () => {
  function setUp(answers: Answer[]) {
    let now = 1_000_000;
    const lookups: number[] = [];
    const choice = new ClaimFunction(
      () => {
        lookups.push(now);
        const answer = answers.shift() ?? 'both';
        const found: ClaimFunctions = { chained: answer !== 'none', fair: answer === 'both' };
        return Promise.resolve(
          answer === 'failed'
            ? fail(new OutboxStoreError('claim', 'connection refused', undefined))
            : ok(found),
        );
      },
      () => now,
    );
    return { choice, lookups, advance: (ms: number) => (now += ms) };
  }

  it('looks the functions up once, at the first claim, when they are there', async () => {
    const { choice, lookups, advance } = setUp(['both']);
    expect(await choice.use(true)).toEqual({ chained: true, fair: true });
    advance(10 * CLAIM_FUNCTION_LOOK_AGAIN_MS);
    expect(await choice.use(true)).toEqual({ chained: true, fair: true });
    expect(lookups).toHaveLength(1);
  });

  it('claims without them while absent and looks again once a minute has passed', async () => {
    const { choice, lookups, advance } = setUp(['none', 'none', 'chained']);
    expect((await choice.use()).chained).toBe(false);
    advance(CLAIM_FUNCTION_LOOK_AGAIN_MS - 1);
    expect((await choice.use()).chained).toBe(false);
    expect(lookups).toHaveLength(1);
    advance(1);
    expect((await choice.use()).chained).toBe(false);
    advance(CLAIM_FUNCTION_LOOK_AGAIN_MS);
    expect((await choice.use()).chained).toBe(true);
    expect(lookups).toHaveLength(3);
  });

  it('looks again for the fair claim only while fair claims are wanted', async () => {
    const { choice, lookups, advance } = setUp(['chained', 'both']);
    expect(await choice.use(false)).toEqual({ chained: true, fair: false });
    advance(10 * CLAIM_FUNCTION_LOOK_AGAIN_MS);
    expect(await choice.use(false)).toEqual({ chained: true, fair: false });
    expect(lookups).toHaveLength(1);
    expect(await choice.use(true)).toEqual({ chained: true, fair: true });
    expect(lookups).toHaveLength(2);
  });

  it('decides nothing from a failed lookup, and looks again after forget()', async () => {
    const { choice, lookups } = setUp(['failed', 'both', 'none']);
    expect(await choice.use()).toEqual({ chained: false, fair: false });
    expect((await choice.use()).chained).toBe(true);
    choice.forget();
    expect((await choice.use()).chained).toBe(false);
    expect(lookups).toHaveLength(3);
  });
});
