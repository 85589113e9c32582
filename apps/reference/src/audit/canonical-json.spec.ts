import { createHash } from 'node:crypto';
import { GENESIS_HASH, chainHash, type AuditContent } from './audit-chain';
import { canonicalJson } from './canonical-json';

describe('canonicalJson', () => {
  it('sorts keys at every depth and writes no whitespace', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: true, y: null }], c: 'x' } })).toBe(
      '{"a":{"c":"x","d":[3,{"y":null,"z":true}]},"b":1}',
    );
  });

  it('gives the same text for the same value whatever the key order', () => {
    expect(canonicalJson({ x: 1, y: [1, 2], z: { b: 2, a: 1 } })).toBe(
      canonicalJson({ z: { a: 1, b: 2 }, y: [1, 2], x: 1 }),
    );
  });

  it('orders keys by UTF-16 code units and writes numbers and strings as RFC 8785 does', () => {
    // The RFC's own sorting example (section 3.2.3) and number forms (appendix B).
    const keys = {
      '\u20ac': 'Euro',
      '\r': 'CR',
      '\ufb33': 'Hebrew',
      '1': 'One',
      '\ud83d\ude00': 'Smiley',
      '\u0080': 'Ctl',
      '\u00f6': 'Latin',
    };
    expect(canonicalJson(keys)).toBe(
      '{"\\r":"CR","1":"One","\u0080":"Ctl","\u00f6":"Latin","\u20ac":"Euro",' +
        '"\ud83d\ude00":"Smiley","\ufb33":"Hebrew"}',
    );
    expect(canonicalJson([-0, 1e21, 1e-7, 0.000001, 333333333.3333333, 5e-324, 'a\n"\u001f'])).toBe(
      '[0,1e+21,1e-7,0.000001,333333333.3333333,5e-324,"a\\n\\"\\u001f"]',
    );
  });

  it('refuses what JSON cannot carry unchanged, naming the path', () => {
    expect(() => canonicalJson({ a: [1, undefined] })).toThrow('$.a[1] is undefined');
    expect(() => canonicalJson({ n: NaN })).toThrow('$.n is NaN');
    expect(() => canonicalJson({ big: 1n })).toThrow('$.big is bigint');
    expect(() => canonicalJson({ at: new Date(0) })).toThrow('$.at is an instance of Date');
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(() => canonicalJson(cycle)).toThrow('$.self is a cycle');
  });

  it('accepts the same object twice when it is not a cycle', () => {
    const shared = { a: 1 };
    expect(canonicalJson([shared, shared])).toBe('[{"a":1},{"a":1}]');
  });
});

describe('chainHash', () => {
  const content: AuditContent = {
    eventId: '0190b0a4-0000-7000-8000-000000000001',
    type: 'invoice.paid',
    aggregateType: 'invoice',
    aggregateId: 'inv-1',
    organizationId: null,
    requestId: 'req-1',
    occurredAt: '2025-01-02T03:04:05.678Z',
    payload: { number: 'INV-1', amountCents: 100 },
    seq: 1,
  };

  it('is sha256 of the previous hash followed by the canonical content', () => {
    const expected = createHash('sha256')
      .update(
        GENESIS_HASH +
          '{"aggregateId":"inv-1","aggregateType":"invoice","eventId":"0190b0a4-0000-7000-8000-000000000001",' +
          '"occurredAt":"2025-01-02T03:04:05.678Z","organizationId":null,' +
          '"payload":{"amountCents":100,"number":"INV-1"},"requestId":"req-1","seq":1,"type":"invoice.paid"}',
      )
      .digest('hex');
    expect(chainHash(GENESIS_HASH, content)).toBe(expected);
  });

  it('changes with the previous hash, the seq and the payload', () => {
    const base = chainHash(GENESIS_HASH, content);
    expect(chainHash('1'.repeat(64), content)).not.toBe(base);
    expect(chainHash(GENESIS_HASH, { ...content, seq: 2 })).not.toBe(base);
    expect(
      chainHash(GENESIS_HASH, { ...content, payload: { number: 'INV-1', amountCents: 101 } }),
    ).not.toBe(base);
  });
});
