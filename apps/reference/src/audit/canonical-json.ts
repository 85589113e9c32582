/**
 * Deterministic JSON for hashing: object keys sorted by UTF-16 code units, no whitespace,
 * strings and numbers written as `JSON.stringify` writes them (ECMAScript's shortest
 * round-trip form, `-0` as `0`). For the values JSON can hold this is the canonical form of
 * RFC 8785 (JCS). The `canonicalize` package implements the same, but its current releases are
 * ESM-only and need Node 22, while this project is CommonJS on Node 20.19.
 *
 * Anything JSON cannot carry unchanged (undefined, functions, symbols, BigInt, NaN and
 * infinities, Dates and other class instances, cycles) is refused with a TypeError naming its
 * path, rather than being dropped or stringified: a hash over a lossy form could not be
 * recomputed from what the database stores.
 */
export function canonicalJson(value: unknown): string {
  return write(value, '$', new Set());
}

function write(value: unknown, path: string, open: Set<object>): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'string':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw refused(path, String(value));
      return JSON.stringify(value);
    case 'object':
      break;
    default:
      throw refused(path, typeof value);
  }
  const node = value;
  if (open.has(node)) throw refused(path, 'a cycle');
  open.add(node);
  try {
    if (Array.isArray(node)) {
      const items: string[] = [];
      for (let i = 0; i < node.length; i++) items.push(write(node[i], `${path}[${i}]`, open));
      return `[${items.join(',')}]`;
    }
    const proto = Object.getPrototypeOf(node) as unknown;
    if (proto !== Object.prototype && proto !== null) {
      throw refused(path, `an instance of ${node.constructor?.name ?? 'a class'}`);
    }
    const record = node as Record<string, unknown>;
    // Array.prototype.sort compares strings by UTF-16 code units, the order RFC 8785 asks for.
    const members = Object.keys(record)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${write(record[key], `${path}.${key}`, open)}`);
    return `{${members.join(',')}}`;
  } finally {
    open.delete(node);
  }
}

function refused(path: string, what: string): TypeError {
  return new TypeError(`canonicalJson: ${path} is ${what}, which JSON cannot represent`);
}
