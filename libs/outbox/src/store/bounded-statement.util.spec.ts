import { inlineValues } from './bounded-statement.util';

describe('inlineValues', () => {
  it('replaces every parameter, $10 apart from $1', () => {
    const values = Array.from({ length: 10 }, (_, i) => i + 1);
    expect(inlineValues('SELECT $1, $10, $2', values)).toBe('SELECT (1), (10), (2)');
  });

  it('writes text as a literal that no quote or backslash can end early', () => {
    expect(inlineValues('SELECT $1', [`it's`])).toBe(`SELECT 'it''s'`);
    expect(inlineValues('SELECT $1', [`a\\'); DROP TABLE x; --`])).toBe(
      `SELECT  E'a\\\\''); DROP TABLE x; --'`,
    );
  });

  it('writes null, booleans, dates, objects and arrays', () => {
    expect(inlineValues('$1 $2 $3', [null, true, undefined])).toBe('NULL TRUE NULL');
    expect(inlineValues('$1', [new Date('2026-01-02T03:04:05.000Z')])).toBe(
      `'2026-01-02T03:04:05.000Z'`,
    );
    expect(inlineValues('$1', [{ a: "b'c" }])).toBe(`'{"a":"b''c"}'`);
    expect(inlineValues('$1', [['a', 'b"c', null]])).toBe(` E'{"a","b\\\\"c",NULL}'`);
  });

  it('refuses a missing value and a number it cannot write', () => {
    expect(() => inlineValues('$2', [1])).toThrow('no value for parameter $2');
    expect(() => inlineValues('$1', [Number.NaN])).toThrow('cannot inline');
  });
});
