import { scrubError } from './scrub-error';

describe('scrubError', () => {
  it.each([
    ['postgres://app:s3cr3t-pw@db.internal:5432/app', 's3cr3t-pw'],
    ['connect to redis://:hunter2@cache:6379 failed', 'hunter2'],
    ['request failed: Authorization: Bearer abc.DEF-123_456', 'abc.DEF-123_456'],
    ['jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl rejected', 'eyJzdWIiOiIxIn0'],
    ['host=db user=app password=topsecret dbname=app', 'topsecret'],
    ['{"apiKey":"k-123456789","user":"ann"}', 'k-123456789'],
    ["config { client_secret: 'cs-987654' }", 'cs-987654'],
    ['stripe sk_live_51Habcdefghijklmnop rejected', 'sk_live_51Habcdefghijklmnop'],
    ['github ghp_abcdefghijklmnopqrstuvwxyz0123 rejected', 'ghp_abcdefghijklmnopqrstuvwxyz0123'],
    ['aws AKIAIOSFODNN7EXAMPLE denied', 'AKIAIOSFODNN7EXAMPLE'],
    ['GET /hook?token=tok_abcdef&x=1', 'tok_abcdef'],
    ['X-Api-Key: key-abcdef-123', 'key-abcdef-123'],
    ['headers {"authorization":"Basic dXNlcjpwYXNz"}', 'dXNlcjpwYXNz'],
    ['sent with bearer AbCdEf0123456789', 'AbCdEf0123456789'],
  ])('removes the secret from %j', (input, secret) => {
    const scrubbed = scrubError(new Error(input));
    expect(scrubbed).not.toContain(secret);
    expect(scrubbed).toContain('[redacted]');
  });

  it('keeps the useful part of the message', () => {
    expect(scrubError(new Error('connect ECONNREFUSED 10.0.0.5:5432'))).toBe(
      'Error: connect ECONNREFUSED 10.0.0.5:5432',
    );
    expect(scrubError(new Error('postgres://app:pw@db:5432/app down'))).toBe(
      'Error: postgres://[redacted]@db:5432/app down',
    );
  });

  it('leaves ordinary words alone', () => {
    expect(scrubError('Token expired; basic checks passed; bearer of bad news')).toBe(
      'Token expired; basic checks passed; bearer of bad news',
    );
  });

  it('names the error class and its code', () => {
    const err = Object.assign(new TypeError('bad input'), { code: 'E_BAD' });
    expect(scrubError(err)).toBe('TypeError [E_BAD]: bad input');
  });

  it('describes errors from another realm by their name and message', () => {
    const foreign = {
      name: 'Error',
      message: 'connect ECONNREFUSED 127.0.0.1:1',
      code: 'ECONNREFUSED',
      stack: '',
    };
    expect(scrubError(foreign)).toBe('Error [ECONNREFUSED]: connect ECONNREFUSED 127.0.0.1:1');
  });

  it('describes non-Error throwables', () => {
    expect(scrubError('plain text')).toBe('plain text');
    expect(scrubError({ reason: 'nope' })).toBe('{"reason":"nope"}');
    expect(scrubError(undefined)).toBe('undefined');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(scrubError(cyclic)).toBe('[object Object]');
  });

  it('bounds the length', () => {
    const scrubbed = scrubError(new Error('x'.repeat(10_000)), 200);
    expect(scrubbed).toHaveLength(200);
    expect(scrubbed.endsWith('(truncated)')).toBe(true);
  });

  it('scrubs before it truncates, so a cut never exposes a secret', () => {
    const scrubbed = scrubError(new Error(`${'y'.repeat(40)} password=abcdefghijkl`), 60);
    expect(scrubbed).not.toContain('abcdefgh');
  });
});
