import { findJsonProblem } from './json-serializable';

describe('findJsonProblem', () => {
  it('accepts plain JSON values, dates and undefined properties', () => {
    expect(
      findJsonProblem({ a: 1, b: 'x', c: [true, null, { d: 2.5 }], e: new Date(0), f: undefined }),
    ).toBeUndefined();
  });

  it('accepts the same object referenced twice without a cycle', () => {
    const shared = { n: 1 };
    expect(findJsonProblem({ left: shared, right: [shared] })).toBeUndefined();
  });

  it.each([
    [{ amount: 10n }, '$.amount', 'a BigInt'],
    [{ cb: () => 1 }, '$.cb', 'a function'],
    [{ s: Symbol('x') }, '$.s', 'a symbol'],
    [{ list: [1, NaN] }, '$.list[1]', 'a non-finite number (NaN)'],
    [{ n: Infinity }, '$.n', 'a non-finite number (Infinity)'],
    [[undefined], '$[0]', 'undefined'],
    [undefined, '$', 'undefined'],
  ])('refuses %p at %s', (value, path, reason) => {
    expect(findJsonProblem(value)).toEqual({ path, reason });
  });

  it('refuses a cycle and names where it closes', () => {
    const order: Record<string, unknown> = { id: 'o1', lines: [] };
    (order.lines as unknown[]).push({ order });
    expect(findJsonProblem(order)).toEqual({
      path: '$.lines[0].order',
      reason: 'a circular reference',
    });
  });

  it('checks what toJSON returns', () => {
    expect(findJsonProblem({ v: { toJSON: () => 5n } })).toEqual({
      path: '$.v',
      reason: 'a BigInt',
    });
  });
});
