import { MAX_ERROR_LENGTH } from '../outbox.constants';

const REDACTED = '[redacted]';
const TRUNCATED = '… (truncated)';

/**
 * How much of the described error the rules read, as a multiple of the output cap. Handlers
 * throw with whole HTTP response bodies (megabytes, on every retry), so the cost of a scrub
 * must not depend on what was thrown; a generous multiple still leaves the rules context well
 * past the visible part, so a long redaction early on leaves real text to fill the output.
 */
const INPUT_FACTOR = 8;

/*
 * Every rule below runs in time linear in its input, whatever the input. The patterns follow
 * three habits to get there:
 *  - a pattern that begins with a repeated class is anchored with a lookbehind to the start of
 *    a run of that class (`NAME_START`), so inside a run of `a-a-a-…` only the first position
 *    tries to match; without it every position rescans the rest of the run;
 *  - quantified parts that follow each other use disjoint classes (`[\w-]+` then `[:=]`), and
 *    quoted strings use the unrolled `"[^"\\]*(?:\\.[^"\\]*)*"` form, so there is at most one
 *    way to split a match and a failure gives up after one pass;
 *  - a pattern whose match can be long either always succeeds once it has started (a value
 *    runs to its end) or stops at characters its start cannot contain, so no two attempts
 *    scan the same text.
 * The spec feeds each rule its worst input at 2 MB; bench/scrub-error.bench.ts times it.
 */
const NAME_START = String.raw`(?<![\w-])`;

/**
 * Endings of names whose value is a secret wherever they appear as `name=value`,
 * `name: value` or `"name": "value"`: `password`, `DB_PASSWORD`, `clientSecret`, `X-Api-Key`.
 */
const SECRET_NAMES = [
  'password',
  'passwd',
  'pwd',
  'passphrase',
  // `pass` alone or after a separator (`{ user, pass }`, SMTP_PASS), not inside a word (bypass).
  '(?<![a-z0-9])pass',
  'secret',
  'token',
  // Any longer name ending in key: api_key, secret_key, aws_secret_access_key, clientKey; a bare
  // `key` is too common (a cache key) outside a query string, where it has a rule of its own.
  String.raw`\w[_-]?key`,
  'credentials?',
  'session[_-]?id',
  'signature',
].join('|');

/** Names too common to redact everywhere that are credentials as URL query parameters. */
const QUERY_SECRET_NAMES = 'key|sig';

/** Authorization schemes, kept in front of the redacted credential because they help debugging. */
const AUTH_SCHEMES = [
  'basic',
  'bearer',
  'digest',
  'dpop',
  'hoba',
  'mutual',
  'negotiate',
  'ntlm',
  'token',
  'apikey',
  'key',
  'vapid',
  'aws4-hmac-sha256',
  'scram-sha-1',
  'scram-sha-256',
].join('|');

/** Separator between a name and its value; `\"` covers JSON that was encoded twice. */
const SEPARATOR = String.raw`\\?["']?\s*[:=]\s*`;

// The BEGIN line is enough: a message cut short still loses the whole key, not just its start.
const PRIVATE_KEY_BLOCK =
  /-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|$)/g;

// A cookie header runs to the end of its line; `redactCookies` decides what in it is a value.
const COOKIE_HEADER = new RegExp(
  String.raw`${NAME_START}([\w-]*?cookie)(${SEPARATOR}\\?["']?)([^\r\n]*)`,
  'gi',
);

// One `;`- or `,`-separated cookie. Values may be quoted (`\"` inside JSON); otherwise they
// stop at `"` and `\`, so a cookie inside a JSON string does not swallow the closing quote.
const COOKIE_PAIR = /(^|[;,])(\s*)([^\s=;,"\\]*)(=?)(\\?"[^\s;,"\\]*\\?"|[^\s;,"\\]*)/g;

const SET_COOKIE_ATTRIBUTE = /^(?:path|domain|expires|max-age|samesite|priority)$/i;

// A known scheme is kept; without one the credential may be two words (an unknown scheme and
// its value), and losing a word of prose is better than leaking half a credential.
const AUTHORIZATION_HEADER = new RegExp(
  String.raw`${NAME_START}([\w-]*?auth(?:orization)?${SEPARATOR}\\?["']?)` +
    String.raw`(?:((?:${AUTH_SCHEMES})[ \t]+)[^\s"',;\\]+|[^\s"',;\\]+(?:[ \t]+[^\s"',;\\]+)?)`,
  'gi',
);

// Outside a header "bearer" is also an English word: only a following word that looks like a
// credential (a digit or token punctuation inside it, or 8+ letters) is redacted.
const BEARER_TOKEN = new RegExp(
  String.raw`${NAME_START}bearer\s+(?=[a-z]*(?:[\d_~+/=-]|\.[\w~+/-])|[a-z]{8})[\w.~+/-]+=*`,
  'gi',
);

// name=value, name: value, "name": "value". The lazy `[\w-]*?` only starts at the beginning of
// a name and walks it once; a value an earlier rule already redacted is left alone; a quote
// that never closes redacts to the end.
const SECRET_ASSIGNMENT = new RegExp(
  String.raw`${NAME_START}((?:[\w-]*?(?:${SECRET_NAMES})|(?<=[?&;])(?:${QUERY_SECRET_NAMES}))${SEPARATOR})` +
    String.raw`(?!\[redacted\])` +
    String.raw`(?:"[^"\\]*(?:\\[\s\S][^"\\]*)*"?|'[^'\\]*(?:\\[\s\S][^'\\]*)*'?|\\"[^"]*"?|[^\s,;&"'})\]]+)`,
  'gi',
);

// JSON Web Tokens; the signature is optional so that a token cut short still goes.
const JWT = /(?<![\w-])eyJ[\w-]+\.[\w-]+(?:\.[\w-]+)?/g;

// Vendor keys with recognisable prefixes: Standard Webhooks secrets (base64, so `+`, `/` and
// `=` are part of them), Stripe, GitHub, Slack, AWS, Google.
const VENDOR_KEYS = [
  /\bwhsec_[a-z0-9+/=]{8,}/gi,
  /\b(?:sk|pk|rk|whsec)_(?:live|test)?_?[a-z0-9]{8,}/gi,
  /\bgh[pousr]_[a-z0-9]{20,}/gi,
  /\bxox[abprs]-[a-z0-9-]{10,}/gi,
  /\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g,
  /\bAIza[\w-]{35}/g,
];

// Webhook URLs whose path is the credential: Slack, Discord, Microsoft Teams. The prefix stays,
// so the log still says where the call went.
const WEBHOOK_URL_PATHS = [
  /(\bhooks\.slack\.com\/(?:services|workflows|triggers)\/)[^\s"'<>`]+/gi,
  /(\b(?:(?:canary|ptb)\.)?discord(?:app)?\.com\/api\/(?:v\d+\/)?webhooks\/)[^\s"'<>`]+/gi,
  /(\.webhook\.office\.com\/webhookb2\/)[^\s"'<>`]+/gi,
];

/**
 * Replacements applied in order. Private keys go first (a `private_key: -----BEGIN …` value
 * would otherwise lose only its first word), then the shapes whose context the generic
 * `name=value` rule would cut in half: URL credentials, cookies, authorization headers.
 */
const RULES: ReadonlyArray<(text: string) => string> = [
  (text) => text.replace(PRIVATE_KEY_BLOCK, REDACTED),
  redactUrlCredentials,
  ...WEBHOOK_URL_PATHS.map((pattern) => (text: string) => text.replace(pattern, `$1${REDACTED}`)),
  (text) =>
    text.replace(
      COOKIE_HEADER,
      (_match, name: string, separator: string, value: string) =>
        name + separator + redactCookies(value, /set-cookie$/i.test(name)),
    ),
  (text) =>
    text.replace(
      AUTHORIZATION_HEADER,
      (_match, prefix: string, scheme: string | undefined) => prefix + (scheme ?? '') + REDACTED,
    ),
  (text) => text.replace(BEARER_TOKEN, `Bearer ${REDACTED}`),
  (text) => text.replace(JWT, REDACTED),
  ...VENDOR_KEYS.map((pattern) => (text: string) => text.replace(pattern, REDACTED)),
  (text) => text.replace(SECRET_ASSIGNMENT, `$1${REDACTED}`),
];

/**
 * Turns anything thrown into text that is safe to store in `last_error`, log or report:
 * connection-string credentials, private keys, cookies, bearer tokens, API keys and
 * `password=`-style values are replaced, and the result is bounded to `maxLength` characters.
 */
export function scrubError(err: unknown, maxLength = MAX_ERROR_LENGTH): string {
  const limit = maxLength * INPUT_FACTOR;
  const described = describeError(err, limit);
  const cut = described.length > limit;
  let text = cut ? boundInput(described, limit, maxLength) : described;
  for (const rule of RULES) text = rule(text);
  // After the rules, some of which read to the end of a line.
  text = escapeControls(text);
  if (cut || text.length > maxLength) {
    const kept = text.slice(0, Math.max(0, maxLength - TRUNCATED.length));
    // Not half an escape: `\u00` alone would read as something else.
    text = kept.replace(/\\(?:u[0-9a-f]{0,3})?$/, '') + TRUNCATED;
  }
  return storable(text);
}

/**
 * C0 and C1 control characters, DEL, line and paragraph separators, and the bidirectional
 * formatting characters: written as `\u001b`. Error text comes from outside (a response body, a
 * driver message) and ends up in log lines and terminals, where a CR/LF forges a line, an
 * escape sequence moves the cursor or recolours, and a bidi override reorders what is shown.
 */
const CONTROLS =
  // eslint-disable-next-line no-control-regex -- control characters are what this finds
  /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

function escapeControls(text: string): string {
  return text.replace(CONTROLS, unicodeEscape);
}

/**
 * The same characters in `JSON.stringify` output, which escapes C0 controls itself but leaves
 * DEL, C1, the separators and bidi characters raw: written as JSON escapes, so the document
 * parses to the same values and its line breaks stay.
 */
const LEFT_RAW_BY_JSON = /[\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

export function escapeControlsInJson(json: string): string {
  return json.replace(LEFT_RAW_BY_JSON, unicodeEscape);
}

function unicodeEscape(c: string): string {
  return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/**
 * What PostgreSQL's text and jsonb refuse, replaced: NUL, and a lone surrogate (an error message
 * may hold one, and a cut may split a pair). One such character must not make a whole settle
 * statement fail.
 */
const NOT_STORABLE =
  // eslint-disable-next-line no-control-regex -- NUL is exactly what must go
  /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function storable(text: string): string {
  return text.replace(NOT_STORABLE, '\uFFFD');
}

/**
 * The first `limit` characters of `text`, less the token the cut goes through: the rules
 * recognise some secrets only by how they end (the `@` after URL credentials, the length of a
 * key), and redactions can shrink the text enough to pull its tail into the output. A token
 * that starts inside the `visible` part is kept: it is thousands of characters long, far more
 * than any rule needs to see, and dropping it would leave nothing of the message.
 */
function boundInput(text: string, limit: number, visible: number): string {
  if (isSpace(text.charCodeAt(limit))) return text.slice(0, limit);
  const token = runStart(text, limit, visible, (c) => !isSpace(c));
  if (token > visible) return text.slice(0, token);
  // Inside one long token (minified JSON, say) drop at least the partial word at the cut.
  const word = runStart(text, limit, visible, isWordChar);
  return text.slice(0, word > visible ? word : limit);
}

/** Where the run of `inRun` characters that ends at `end` starts, looking back no further than `floor`. */
function runStart(text: string, end: number, floor: number, inRun: (c: number) => boolean) {
  let start = end;
  while (start > floor && inRun(text.charCodeAt(start - 1))) start--;
  return start;
}

function isSpace(c: number): boolean {
  return c === 32 || (c >= 9 && c <= 13) || c === 0xa0 || c === 0x2028 || c === 0x2029;
}

/** Characters of keys and tokens: base64 and base64url, JWT dots, vendor-key underscores. */
function isWordChar(c: number): boolean {
  return (
    (c >= 48 && c <= 57) ||
    (c >= 65 && c <= 90) ||
    (c >= 97 && c <= 122) ||
    '_-.~+/='.includes(String.fromCharCode(c))
  );
}

/**
 * `scheme://user:password@host` -> `scheme://[redacted]@host`. A scanner rather than a regex:
 * passwords are often not percent-encoded, so `p@ss/w@rd` puts `@` and `/` inside the
 * credentials, and telling them apart from a path needs the last `@` of the URL, which a
 * regex can only find by backtracking over the URL from every `://`. Here each character
 * after a `://` is read once, up to the next `://`.
 */
function redactUrlCredentials(text: string): string {
  let out = '';
  let copied = 0;
  let scheme = text.indexOf('://');
  while (scheme !== -1) {
    const start = scheme + 3;
    const next = text.indexOf('://', start);
    const end = credentialsEnd(text, start, next === -1 ? text.length : next);
    if (end > start) {
      out += text.slice(copied, start) + REDACTED;
      copied = end;
    }
    scheme = next;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/**
 * Where the credentials after a `://` at `start` end (the `@` before the host), or -1 when
 * there are none. The URL ends at whitespace or at a character that cannot be part of one
 * (an unescaped `"`, `<`, `>`, a backtick), as in JSON, HTML or Markdown.
 */
function credentialsEnd(text: string, start: number, limit: number): number {
  let end = start;
  let authorityEnd = -1;
  let atInAuthority = false;
  let lastAt = -1;
  let lastColon = -1;
  for (; end < limit; end++) {
    const c = text[end];
    if (isSpace(text.charCodeAt(end)) || c === '<' || c === '>' || c === '`') break;
    if (c === '"' && text[end - 1] !== '\\') break;
    if (c === '@') {
      lastAt = end;
      if (authorityEnd === -1) atInAuthority = true;
    } else if (authorityEnd === -1) {
      if (c === '/' || c === '?' || c === '#') authorityEnd = end;
      else if (c === ':') lastColon = end;
    }
  }
  if (atInAuthority) return lastAt;
  // No `@` before the path: `host` or `host:port` (maybe followed by punctuation that ends a
  // sentence), unless what follows the colon is not a port, which means a password with `/`,
  // `?` or `#` in it, or one whose `@` was cut off.
  if (lastColon === -1 || text[start] === '[') return -1;
  const port = text.slice(lastColon + 1, authorityEnd === -1 ? end : authorityEnd);
  if (/^\d+[.,;:!)\]'}]*$/.test(port)) return -1;
  if (lastAt !== -1) return lastAt;
  // Stopped at a space, a quote or a bracket after `user:` and something that is no port: a
  // password with such a character in it, when an `@` follows on the same line.
  if (authorityEnd === -1 && end < limit) {
    const at = atAhead(text, end, limit);
    if (at !== -1) return at;
  }
  return port === '' ? -1 : authorityEnd === -1 ? end : authorityEnd;
}

/** The first `@` from `from` on, within 256 characters, before `limit` and the end of the line. */
function atAhead(text: string, from: number, limit: number): number {
  const end = Math.min(limit, from + 256);
  for (let i = from; i < end; i++) {
    const c = text[i];
    if (c === '@') return i;
    if (c === '\n' || c === '\r') return -1;
  }
  return -1;
}

/**
 * The values of a `Cookie:` or `Set-Cookie:` header: every `name=value` loses its value, and so
 * does a leading value without a name. In `Set-Cookie` the standard attributes (`Path=/`,
 * `Expires=…`) are kept; anything else, such as a second cookie joined with a comma, is not.
 */
function redactCookies(value: string, setCookie: boolean): string {
  return value.replace(
    COOKIE_PAIR,
    (pair, sep: string, space: string, name: string, eq: string, _value, offset: number) => {
      if (eq === '') return offset === 0 && name !== '' ? sep + space + REDACTED : pair;
      if (setCookie && SET_COOKIE_ATTRIBUTE.test(name)) return pair;
      return `${sep}${space}${name}=${REDACTED}`;
    },
  );
}

/**
 * The error as text, each part cut to one character past `limit` (enough to tell whether the
 * whole was longer): joining a megabyte message to its prefix first would copy all of it.
 */
function describeError(err: unknown, limit: number): string {
  const head = (text: string) => (text.length > limit ? text.slice(0, limit + 1) : text);
  // Duck-typed rather than `instanceof Error`: errors from another realm (a VM context, a
  // test sandbox) are still errors.
  if (isErrorLike(err)) {
    const name = typeof err.name === 'string' && err.name !== '' ? head(err.name) : 'Error';
    const code = typeof err.code === 'string' && err.code !== '' ? head(err.code) : undefined;
    const prefix = code === undefined ? name : `${name} [${code}]`;
    return err.message ? `${prefix}: ${head(err.message)}` : prefix;
  }
  if (typeof err === 'string') return head(err);
  try {
    return head(JSON.stringify(err) ?? String(err));
  } catch {
    return head(String(err));
  }
}

function isErrorLike(err: unknown): err is { name?: unknown; message: string; code?: unknown } {
  return (
    typeof err === 'object' &&
    err !== null &&
    typeof (err as { message?: unknown }).message === 'string' &&
    (err instanceof Error || 'stack' in err)
  );
}
