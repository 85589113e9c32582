import { MAX_ERROR_LENGTH } from './outbox.constants';

const REDACTED = '[redacted]';

/** Names whose value is a secret wherever they appear as `name=value` or `"name": "value"`. */
const SECRET_KEYS = [
  'password',
  'passwd',
  'pwd',
  'secret',
  'client[_-]?secret',
  'token',
  'access[_-]?token',
  'refresh[_-]?token',
  'id[_-]?token',
  'api[_-]?key',
  'x[_-]?api[_-]?key',
  'private[_-]?key',
  'session[_-]?id',
  'cookie',
  'signature',
].join('|');

/**
 * Each rule replaces one shape of secret. Order matters: credentials inside URLs and
 * `Authorization: Bearer ...` go first so the generic `key=value` rule does not leave
 * half of them behind.
 */
const RULES: ReadonlyArray<readonly [RegExp, string]> = [
  // scheme://user:password@host -> scheme://[redacted]@host
  [/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/@]+@/gi, `$1${REDACTED}@`],
  // Authorization headers, whatever the scheme: keep the scheme name, drop the credential
  [/\b((?:proxy-)?authorization["']?\s*[:=]\s*["']?)(\w+\s+)?[^\s"',;]+/gi, `$1$2${REDACTED}`],
  // Bearer credentials outside a header
  [/\bbearer\s+[a-z0-9\-._~+/]{8,}=*/gi, `Bearer ${REDACTED}`],
  // JSON Web Tokens
  [/\beyJ[\w-]+\.[\w-]+\.[\w-]+/g, REDACTED],
  // Vendor keys with recognisable prefixes: Stripe, GitHub, Slack, AWS, Google
  [/\b(?:sk|pk|rk|whsec)_(?:live|test)?_?[a-z0-9]{8,}/gi, REDACTED],
  [/\bgh[pousr]_[a-z0-9]{20,}/gi, REDACTED],
  [/\bxox[abprs]-[a-z0-9-]{10,}/gi, REDACTED],
  [/\b(?:AKIA|ASIA)[0-9A-Z]{16}\b/g, REDACTED],
  [/\bAIza[\w-]{35}/g, REDACTED],
  // key=value, key: value, "key": "value" (quoted or bare values)
  [
    new RegExp(
      `(["']?)\\b([\\w-]*(?:${SECRET_KEYS}))\\1(\\s*[:=]\\s*)("[^"]*"|'[^']*'|[^\\s,;&"'})]+)`,
      'gi',
    ),
    `$1$2$1$3${REDACTED}`,
  ],
];

/**
 * Turns anything thrown into text that is safe to store in `last_error`, log or report:
 * connection-string credentials, bearer tokens, API keys and `password=`-style values are
 * replaced, and the result is bounded to `maxLength` characters.
 */
export function scrubError(err: unknown, maxLength = MAX_ERROR_LENGTH): string {
  let text = describeError(err);
  for (const [pattern, replacement] of RULES) text = text.replace(pattern, replacement);
  if (text.length <= maxLength) return text;
  const marker = '… (truncated)';
  return text.slice(0, Math.max(0, maxLength - marker.length)) + marker;
}

function describeError(err: unknown): string {
  // Duck-typed rather than `instanceof Error`: errors from another realm (a VM context, a
  // test sandbox) are still errors.
  if (isErrorLike(err)) {
    const name = typeof err.name === 'string' && err.name !== '' ? err.name : 'Error';
    const prefix = typeof err.code === 'string' && err.code !== '' ? `${name} [${err.code}]` : name;
    return err.message ? `${prefix}: ${err.message}` : prefix;
  }
  if (typeof err === 'string') return err;
  try {
    return JSON.stringify(err) ?? String(err);
  } catch {
    return String(err);
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
