import { scrubError } from './scrub-error.util';

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
    ['secret_key=sk-abc123', 'sk-abc123'],
    ['SECRET_KEY: "flask-secret-value"', 'flask-secret-value'],
    ['aws_secret_access_key=wJalrXUtnFEMI/K7MDENG', 'wJalrXUtnFEMI/K7MDENG'],
    ['access_key=AK-123-456', 'AK-123-456'],
    ['{"encryption_key":"enc-998877"}', 'enc-998877'],
    ['{"clientKey":"ck-445566"}', 'ck-445566'],
    ['credentials=user:pw-5544', 'pw-5544'],
    ['auth: Basic dXNlcjpwYXNzd29yZA==', 'dXNlcjpwYXNzd29yZA=='],
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

  describe('credentials in URLs', () => {
    it.each([
      ['postgres://user:p@ss/w@rd@db.example:5432/app', ['p@ss', 'ss/w', 'w@rd']],
      ['postgres://user:pa/ss@db.example:5432/app', ['pa/ss', 'ss@']],
      ['postgres://user:pa?ss#w@db.example:5432/app', ['pa?ss', 'ss#w']],
      ['postgres://user@db.example:5432/app', ['user@']],
    ])('removes the password of %j and keeps the host', (url, fragments) => {
      const scrubbed = scrubError(new Error(`connect ${url} failed`));
      expect(scrubbed).toBe('Error: connect postgres://[redacted]@db.example:5432/app failed');
      for (const fragment of fragments) expect(scrubbed).not.toContain(fragment);
    });

    it('redacts a password whose @ was cut off', () => {
      expect(scrubError('at postgres://user:hunter2')).toBe('at postgres://[redacted]');
    });

    it.each([
      'connect ECONNREFUSED http://localhost:3000.',
      'see https://mastodon.social/@alice and https://mastodon.social:443/@bob',
      'GET https://host.example/path?email=a@b.example failed',
      '{"url":"https://host.example","email":"a@b.example"}',
      'mongodb://h1:27017,h2:27017/db?replicaSet=rs0 unreachable',
      'http://[::1]:8080/x and http://[::1]/@y',
    ])('leaves %j alone', (text) => {
      expect(scrubError(text)).toBe(text);
    });
  });

  describe('cookies', () => {
    it('removes every value of a Cookie header and keeps the names', () => {
      expect(scrubError('GET /me with Cookie: a=1; session=abc; theme=dark')).toBe(
        'GET /me with Cookie: a=[redacted]; session=[redacted]; theme=[redacted]',
      );
    });

    it('removes a cookie without a name', () => {
      expect(scrubError('{"cookie":"abc123","user":"ann"}')).toBe(
        '{"cookie":"[redacted]","user":"ann"}',
      );
    });

    it('removes Set-Cookie values, keeping the attributes', () => {
      const scrubbed = scrubError(
        'HTTP 302\nSet-Cookie: sid=abc123; Path=/; Expires=Wed, 21 Oct 2015 07:28:00 GMT; HttpOnly, csrf=xyz789; Path=/\nLocation: /login',
      );
      expect(scrubbed).toBe(
        'HTTP 302\\u000aSet-Cookie: sid=[redacted]; Path=/; Expires=Wed, 21 Oct 2015 07:28:00 GMT; HttpOnly, csrf=[redacted]; Path=/\\u000aLocation: /login',
      );
    });

    it('removes cookies inside JSON without eating its quotes', () => {
      expect(scrubError('{"headers":{"cookie":"a=1; b=\\"2\\"","accept":"*/*"}}')).toBe(
        '{"headers":{"cookie":"a=[redacted]; b=[redacted]","accept":"*/*"}}',
      );
    });
  });

  describe('secret-named values', () => {
    it('removes a JSON string with escaped quotes whole', () => {
      const scrubbed = scrubError(new Error('{"password":"ab\\"cd\\"ef","user":"x"}'));
      expect(scrubbed).not.toMatch(/ab|cd|ef/);
      expect(scrubbed).toContain('"user":"x"');
    });

    it('removes values in JSON that was encoded twice', () => {
      const scrubbed = scrubError({ body: JSON.stringify({ password: 'hunter2', user: 'x' }) });
      expect(scrubbed).not.toContain('hunter2');
      expect(scrubbed).toContain('\\"user\\":\\"x\\"');
    });

    it('redacts to the end when the quote never closes', () => {
      expect(scrubError('{"password":"hunter2 and more')).toBe('{"password":[redacted]');
    });

    it.each([
      ['https://api.example/v1?key=AIzaXYZ&q=1', 'https://api.example/v1?key=[redacted]&q=1'],
      ['GET /files?q=1&key=abc123', 'GET /files?q=1&key=[redacted]'],
      ['GET /blob?sv=2024&sig=abc%2Bdef&se=1', 'GET /blob?sv=2024&sig=[redacted]&se=1'],
      ['/unlock?passphrase=open-sesame&x=1', '/unlock?passphrase=[redacted]&x=1'],
      ['/hook?secret=s3cr3t&x=1', '/hook?secret=[redacted]&x=1'],
    ])('removes the credential of the query %j', (text, expected) => {
      expect(scrubError(text)).toBe(expected);
    });

    it('keeps `key` outside a query string', () => {
      const text = 'duplicate key value violates unique constraint; cache key=user:1 missing';
      expect(scrubError(text)).toBe(text);
    });
  });

  describe('private keys', () => {
    it.each(['', 'RSA ', 'EC ', 'OPENSSH ', 'ENCRYPTED '])(
      'removes a whole %sPRIVATE KEY block',
      (kind) => {
        const block = `-----BEGIN ${kind}PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\nAQEFAASCBKcwggSjAgEAAoIB\n-----END ${kind}PRIVATE KEY-----`;
        expect(scrubError(new Error(`bad key: ${block}\nwhile signing`))).toBe(
          'Error: bad key: [redacted]\\u000awhile signing',
        );
      },
    );

    it('removes a block whose END line was cut off', () => {
      const scrubbed = scrubError(
        '{"private_key":"-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0B\\nAQEFAASC',
      );
      expect(scrubbed).toBe('{"private_key":[redacted]');
    });

    it('removes a key given as the value of a secret-named field', () => {
      const scrubbed = scrubError(
        'private_key: -----BEGIN RSA PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\n-----END RSA PRIVATE KEY-----\nnext line',
      );
      expect(scrubbed).toBe('private_key: [redacted]\\u000anext line');
    });
  });

  describe('bearer tokens', () => {
    it.each([
      ['Authorization: Bearer abc', 'Authorization: Bearer [redacted]'],
      ['authorization=tok123 was rejected', 'authorization=[redacted] rejected'],
      [
        'Proxy-Authorization: Basic dXNlcjpwYXNz, retrying',
        'Proxy-Authorization: Basic [redacted], retrying',
      ],
      ['Authorization: Custom abc, retrying', 'Authorization: [redacted], retrying'],
      ['sent with bearer abc123 and failed', 'sent with Bearer [redacted] and failed'],
      ['sent with Bearer ab.c and failed', 'sent with Bearer [redacted] and failed'],
    ])('removes the credential of %j', (text, expected) => {
      expect(scrubError(text)).toBe(expected);
    });
  });

  describe('input of any size', () => {
    const planted = 'connect postgres://app:Planted-Pw9@db/app failed: ';
    // Each unit drives one rule the furthest: long runs its pattern can start anywhere in,
    // starts that never find their end, values that never close.
    it.each([
      'a-',
      'QUJD',
      'a@',
      'a:',
      '://',
      'a://',
      '://u:',
      'x:p/',
      'password=',
      'password: ',
      '"password":"',
      'password="\\',
      'x-api-key',
      '?key',
      'Bearer ',
      'bearer 1 ',
      'authorization: x ',
      'Cookie: a=1;',
      'cookie:.',
      '-----BEGIN PRIVATE KEY-----',
      '-----END A ',
      'eyJa-',
      'eyJa.',
      'sk_a-',
      'xoxb-',
      'AKIA',
    ])('scrubs 2 MB of %j into bounded text', (unit) => {
      const message = `${planted}${unit.repeat(Math.ceil(2_000_000 / unit.length))} password=Tail-Pw9`;
      const scrubbed = scrubError(new Error(message));
      expect(scrubbed.length).toBeLessThanOrEqual(2000);
      expect(scrubbed.endsWith('(truncated)')).toBe(true);
      expect(scrubbed).toContain('Error: connect postgres://[redacted]@db/app failed: ');
      expect(scrubbed).not.toMatch(/Planted-Pw9|Tail-Pw9/);
    });

    it('bounds thrown strings and objects the same way', () => {
      const body = `password=Planted-Pw9 ${'a-'.repeat(1_000_000)}`;
      for (const thrown of [body, { status: 500, body }]) {
        const scrubbed = scrubError(thrown);
        expect(scrubbed.length).toBeLessThanOrEqual(2000);
        expect(scrubbed).toContain('password=[redacted] a-a-');
        expect(scrubbed).not.toContain('Planted-Pw9');
      }
    });

    it('never shows part of a token cut at the input bound', () => {
      // A redaction before the bound shrinks the text, pulling whatever sits at the bound into
      // view; a GitHub token cut after 10 characters no longer looks like one. The lead is a
      // private key (many words), or one long word-free JSON body with a long password. The
      // bound is some multiple of the output cap: try each.
      const leads = [
        (size: number) =>
          `-----BEGIN PRIVATE KEY-----${'A'.repeat(size)}-----END PRIVATE KEY----- then token `,
        (size: number) => `upstream said {"password":"${'p'.repeat(size)}","id":"`,
      ];
      for (const lead of leads) {
        for (let multiple = 2; multiple <= 16; multiple++) {
          const size = 2000 * multiple - 'Error: '.length - lead(0).length - 10;
          const scrubbed = scrubError(new Error(`${lead(size)}ghp_${'x'.repeat(36)}"} trailing`));
          expect(scrubbed).not.toContain('ghp_');
          expect(scrubbed).not.toContain('ppp');
        }
      }
    });

    it('shows the start of one long token', () => {
      const scrubbed = scrubError(`upstream said ${'x'.repeat(20_000)}`, 200);
      expect(scrubbed).toHaveLength(200);
      expect(scrubbed.startsWith('upstream said xxx')).toBe(true);
    });
  });
});

describe('scrubError output is storable', () => {
  it('escapes NUL and replaces lone surrogates, including a pair split by the length bound', () => {
    expect(scrubError(new Error('a\u0000b'))).toBe('Error: a\\u0000b');
    expect(scrubError('lone \ud83d here')).toBe('lone \uFFFD here');
    const split = scrubError(`${'x'.repeat(1961)}\u{1F600}${'y'.repeat(100)}`);
    expect(split).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
    expect(scrubError('pair \u{1F600} kept')).toBe('pair \u{1F600} kept');
  });
});

describe('scrubError output is one line of plain text', () => {
  it.each([
    ['\u001b[2J\u001b[31mforged', 'Error: \\u001b[2J\\u001b[31mforged'],
    [
      'body\r\n2026-12-02 ERROR forged line',
      'Error: body\\u000d\\u000a2026-12-02 ERROR forged line',
    ],
    ['tab\there and DEL\u007f, C1 \u009b', 'Error: tab\\u0009here and DEL\\u007f, C1 \\u009b'],
    ['name \u202egnp.exe', 'Error: name \\u202egnp.exe'],
    [
      'isolate \u2066x\u2069 mark \u200f \u061c line\u2028sep',
      'Error: isolate \\u2066x\\u2069 mark \\u200f \\u061c line\\u2028sep',
    ],
  ])('escapes the control and bidi characters of %j', (message, expected) => {
    expect(scrubError(new Error(message))).toBe(expected);
  });

  it('keeps ordinary non-ASCII text', () => {
    expect(scrubError(new Error('échec: Zürich — 東京 ✓'))).toBe('Error: échec: Zürich — 東京 ✓');
  });

  it('never ends in half an escape when the length bound cuts one', () => {
    for (let pad = 0; pad < 8; pad++) {
      const scrubbed = scrubError('x'.repeat(80 + pad) + '\u001b'.repeat(40), 100);
      expect(scrubbed.length).toBeLessThanOrEqual(100);
      expect(scrubbed).toMatch(/^x+(?:\\u001b)*… \(truncated\)$/);
    }
  });
});

describe('scrubError closes the gaps of common secret shapes', () => {
  it.each([
    ["auth: { user: 'mailer', pass: 'p4ss-w0rd' }", 'p4ss-w0rd'],
    ['{"user":"mailer","pass":"p4ss-w0rd"}', 'p4ss-w0rd'],
    ['SMTP_PASS=p4ss-w0rd', 'p4ss-w0rd'],
    ['{"pwd":"p4ss-w0rd"}', 'p4ss-w0rd'],
    ['signing with whsec_MfKQ9r8G+Kqr/TwjUPD8=ILPZ', 'TwjUPD8'],
    ['signing with whsec_MfKQ9r8G+Kqr/TwjUPD8=ILPZ', 'ILPZ'],
    ['POST https://hooks.slack.com/services/T0001/B0002/XXXXsecretXXXX failed', 'XXXXsecretXXXX'],
    ['POST https://discord.com/api/webhooks/123456789/tok-EN_secret failed', 'tok-EN_secret'],
    [
      'POST https://discordapp.com/api/v10/webhooks/123456789/tok-EN_secret failed',
      'tok-EN_secret',
    ],
    [
      'POST https://acme.webhook.office.com/webhookb2/abc-123@def/IncomingWebhook/xyz/secret failed',
      'secret',
    ],
    ['connect postgres://app:pa"ss@db/app failed', 'ss@'],
    ['connect postgres://app:pa<s>s@db/app failed', 's>s'],
    ['connect postgres://app:pa ss@db/app failed', ' ss@'],
  ])('removes the secret from %j', (input, secret) => {
    const scrubbed = scrubError(new Error(input));
    expect(scrubbed).not.toContain(secret);
    expect(scrubbed).toContain('[redacted]');
  });

  it.each(['bypass: true', 'compass=north', 'the pass rate is 90%'])('leaves %j alone', (text) => {
    expect(scrubError(text)).toBe(text);
  });

  it('keeps the host of a URL whose password holds a space', () => {
    expect(scrubError('connect postgres://app:pa ss@db/app failed')).toBe(
      'connect postgres://[redacted]@db/app failed',
    );
  });
});
