import { findJsonProblem, findTextProblem, MAX_JSON_DEPTH } from './json-serializable.util';

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

  it.each([
    [
      { items: [{}, {}, {}, { name: 'a\u0000b' }] },
      '$.items[3].name',
      'a string containing NUL (\\u0000)',
    ],
    [{ note: 'x\ud800' }, '$.note', 'a string containing a lone UTF-16 surrogate'],
    [{ note: '\udc00x' }, '$.note', 'a string containing a lone UTF-16 surrogate'],
    [{ 'a\u0000b': 1 }, '$["a\\u0000b"]', 'a key containing NUL (\\u0000)'],
    [
      { nested: { '\ud800': 1 } },
      '$.nested["\\ud800"]',
      'a key containing a lone UTF-16 surrogate',
    ],
    [{ tags: new Map([['a', 1]]) }, '$.tags', 'a Map, which JSON cannot represent'],
    [{ ids: new Set([1]) }, '$.ids', 'a Set, which JSON cannot represent'],
    [{ w: new WeakMap() }, '$.w', 'a WeakMap, which JSON cannot represent'],
    [{ re: /x/ }, '$.re', 'a RegExp, which JSON cannot represent'],
    [{ e: new Error('boom') }, '$.e', 'a Error, which JSON cannot represent'],
    [{ bytes: new Uint8Array(2) }, '$.bytes', 'a Uint8Array, which JSON cannot represent'],
  ])('refuses %j at %s', (value, path, reason) => {
    expect(findJsonProblem(value)).toEqual({ path, reason });
  });

  it('accepts surrogate pairs, class instances, null-prototype objects and NUL-free text', () => {
    class Money {
      constructor(readonly cents: number) {}
    }
    const bare = Object.assign(Object.create(null) as object, { k: 'v' });
    expect(
      findJsonProblem({ emoji: '😀', price: new Money(5), bare, 'ключ-1': 'é' }),
    ).toBeUndefined();
  });

  it('ignores NUL in a key whose value is undefined, which JSON leaves out', () => {
    expect(findJsonProblem({ 'a\u0000': undefined })).toBeUndefined();
  });

  it('checks what toJSON returns but does not call toJSON on that result', () => {
    class Twice {
      readonly a = 1;
      toJSON() {
        return 1n;
      }
    }
    // JSON.stringify writes {"v":{"a":1}}: the Twice returned is not asked for toJSON again.
    expect(findJsonProblem({ v: { toJSON: () => new Twice() } })).toBeUndefined();
    expect(findJsonProblem({ v: { toJSON: () => ({ inner: new Twice() }) } })).toEqual({
      path: '$.v.inner',
      reason: 'a BigInt',
    });
    expect(findJsonProblem({ v: { toJSON: () => new Map() } })).toEqual({
      path: '$.v',
      reason: 'a Map, which JSON cannot represent',
    });
    expect(findJsonProblem({ v: { toJSON: () => 'a\u0000' } })).toEqual({
      path: '$.v',
      reason: 'a string containing NUL (\\u0000)',
    });
  });

  it(`accepts ${MAX_JSON_DEPTH} levels of nesting and refuses one more`, () => {
    expect(findJsonProblem(nested(MAX_JSON_DEPTH))).toBeUndefined();
    expect(findJsonProblem(nested(MAX_JSON_DEPTH + 1))).toMatchObject({
      reason: `nested deeper than ${MAX_JSON_DEPTH} levels`,
    });
  });

  it('refuses 100,000 levels without overflowing the stack, with a short path', () => {
    const problem = findJsonProblem(nested(100_000), 'payload');
    expect(problem?.reason).toBe('nested deeper than 256 levels');
    expect(problem?.path.length).toBeLessThanOrEqual(400);
    expect(problem?.path).toMatch(/^payload(\[0\])+…(\[0\])+$/);
  });

  it('names a key it cannot show plainly in quotes, shortened', () => {
    const key = `${'k'.repeat(100)}\u0000`;
    expect(findJsonProblem({ [key]: 1 })).toEqual({
      path: `$["${'k'.repeat(64)}…"]`,
      reason: 'a key containing NUL (\\u0000)',
    });
    expect(findJsonProblem({ 'a b': 1n })?.path).toBe('$["a b"]');
  });

  it('walks a wide payload to its last element: a problem at the very end is still found', () => {
    const wide: unknown[] = Array.from({ length: 200_000 }, (_, i) => ({ i, s: 'x'.repeat(20) }));
    expect(findJsonProblem(wide)).toBeUndefined();
    wide.push({ s: 'bad\u0000' });
    expect(findJsonProblem(wide)).toEqual({
      path: '$[200000].s',
      reason: 'a string containing NUL (\\u0000)',
    });
  });

  it('does not put values in a problem', () => {
    const problem = findJsonProblem({ secret: 'hunter2\u0000', token: new Set(['hunter2']) });
    expect(JSON.stringify(problem)).not.toContain('hunter2');
  });
});

describe('findTextProblem', () => {
  it.each([
    ['plain', undefined],
    ['😀', undefined],
    ['a\u0000', 'containing NUL (\\u0000)'],
    ['\ud83d', 'containing a lone UTF-16 surrogate'],
    ['\ude00\ud83d', 'containing a lone UTF-16 surrogate'],
  ])('%j -> %s', (text, expected) => {
    expect(findTextProblem(text)).toBe(expected);
  });
});

/** An array `depth` levels deep: `[[[...[]...]]]`. */
function nested(depth: number): unknown[] {
  let value: unknown[] = [];
  for (let i = 1; i < depth; i++) value = [value];
  return value;
}
