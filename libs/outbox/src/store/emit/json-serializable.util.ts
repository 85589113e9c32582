/** Where a value stops being plain JSON, and why. */
export interface JsonProblem {
  path: string;
  reason: string;
}

/**
 * Deepest nesting of arrays and objects accepted. `JSON.stringify` recurses and overflows the
 * stack somewhere past a few thousand levels, and PostgreSQL's jsonb parser has its own stack
 * limit; 256 is far deeper than any event needs and far below both.
 */
export const MAX_JSON_DEPTH = 256;

/** Longest path put in a message; longer ones keep their two ends around an ellipsis. */
const MAX_PATH_LENGTH = 400;
/** Longest key echoed in a path. */
const MAX_KEY_LENGTH = 64;
/** Keys shown as `.key`; any other key is quoted, so a path never carries control characters. */
const PLAIN_KEY = /^[\p{L}\p{N}\p{M}_$-]+$/u;
/** In a `u` regex a surrogate pair is one code point, so only a lone surrogate is `Cs`. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * What stops `text` from being stored as PostgreSQL text or jsonb, as `containing ...`:
 * NUL (refused by both) or a lone UTF-16 surrogate (refused by jsonb, silently replaced with
 * U+FFFD in text). Undefined when the text is storable.
 */
export function findTextProblem(text: string): string | undefined {
  if (text.includes('\u0000')) return 'containing NUL (\\u0000)';
  if (LONE_SURROGATE.test(text)) return 'containing a lone UTF-16 surrogate';
  return undefined;
}

/** An array index, an object key, or (with no parent) the root's name. */
type Segment = number | string;

/** An array or object being walked: where it sits, and which child comes next. */
interface Frame {
  readonly parent: Frame | undefined;
  /** The parent's index or key for this container, or the root's name; formatted on demand. */
  readonly segment: Segment;
  readonly container: object;
  /** Own enumerable keys of an object; undefined for an array. */
  readonly keys: readonly string[] | undefined;
  readonly length: number;
  readonly depth: number;
  next: number;
}

/**
 * Finds the first part of `value` that `JSON.stringify` would throw on, drop silently or
 * change, or that PostgreSQL would refuse: BigInt, functions, symbols, non-finite numbers,
 * cycles, NUL or lone surrogates in strings and keys, nesting deeper than `MAX_JSON_DEPTH`,
 * and objects JSON cannot represent (see `inspect`). `undefined` object properties are allowed
 * (JSON leaves them out, which is what TypeScript optional fields mean); objects with `toJSON`
 * (Date, Decimal libraries) are checked through what `toJSON` returns.
 *
 * The walk keeps its own stack, so any depth is refused rather than overflowing the call stack,
 * and builds a path only for the problem it reports, so it stays linear in the input's size.
 * Problems name paths and reasons, never values: payloads may carry secrets.
 */
export function findJsonProblem(value: unknown, root = '$'): JsonProblem | undefined {
  const open = new Set<object>();
  let top: Frame | undefined;
  // The next value to check and how its container reaches it; `segment` is undefined once the
  // value has been checked and the walk moves on to the next child of `top`.
  let child: unknown = value;
  let segment: Segment | undefined = root;
  for (;;) {
    if (segment !== undefined) {
      const found = inspect(child, true);
      if (typeof found === 'string') return problem(top, segment, found);
      if (found !== undefined) {
        if (open.has(found)) return problem(top, segment, 'a circular reference');
        const depth = (top?.depth ?? 0) + 1;
        if (depth > MAX_JSON_DEPTH) {
          return problem(top, segment, `nested deeper than ${MAX_JSON_DEPTH} levels`);
        }
        open.add(found);
        const keys = Array.isArray(found) ? undefined : Object.keys(found);
        const length = keys ? keys.length : (found as unknown[]).length;
        top = { parent: top, segment, container: found, keys, length, depth, next: 0 };
      }
      segment = undefined;
    }
    if (!top) return undefined;
    if (top.next === top.length) {
      open.delete(top.container);
      top = top.parent;
      continue;
    }
    const index: number = top.next++;
    if (!top.keys) {
      child = (top.container as unknown[])[index];
      segment = index;
      continue;
    }
    const key: string = top.keys[index];
    child = (top.container as Record<string, unknown>)[key];
    if (child === undefined) continue;
    const keyProblem = findTextProblem(key);
    if (keyProblem) return problem(top, key, `a key ${keyProblem}`);
    segment = key;
  }
}

/**
 * What a value is to the walk: a reason it is refused, an array or object to walk into, or
 * undefined for a JSON primitive.
 *
 * Only arrays and objects whose `Object.prototype.toString` tag is `Object` (plain objects,
 * class instances) are walked: their own enumerable properties are what JSON writes. Every other
 * object without `toJSON` is refused: Map, Set, WeakMap, WeakSet, RegExp, Error and Promise
 * become `{}`, typed arrays become objects keyed by index, boxed primitives lose their box, so
 * what would be stored is not what was emitted. A class that sets `Symbol.toStringTag` is refused
 * too; giving it a `toJSON` says what to store.
 */
function inspect(value: unknown, callToJson: boolean): string | object | undefined {
  switch (typeof value) {
    case 'string': {
      const text = findTextProblem(value);
      return text ? `a string ${text}` : undefined;
    }
    case 'boolean':
      return undefined;
    case 'number':
      return Number.isFinite(value) ? undefined : `a non-finite number (${value})`;
    case 'bigint':
      return 'a BigInt';
    case 'function':
      return 'a function';
    case 'symbol':
      return 'a symbol';
    case 'undefined':
      return 'undefined';
  }
  if (value === null) return undefined;
  const object = value as object;
  const toJSON = (object as { toJSON?: unknown }).toJSON;
  // JSON.stringify calls toJSON once and writes its result as it is, without calling it again.
  if (callToJson && typeof toJSON === 'function') {
    return inspect((toJSON as (this: object) => unknown).call(object), false);
  }
  if (Array.isArray(object)) return object as unknown[];
  const tag = Object.prototype.toString.call(object).slice('[object '.length, -1);
  return tag === 'Object' ? object : `a ${tag}, which JSON cannot represent`;
}

function format(segment: Segment, isRoot: boolean): string {
  if (isRoot) return String(segment);
  if (typeof segment === 'number') return `[${segment}]`;
  const key = segment;
  if (key.length <= MAX_KEY_LENGTH && PLAIN_KEY.test(key)) return `.${key}`;
  const shown = key.length > MAX_KEY_LENGTH ? `${key.slice(0, MAX_KEY_LENGTH)}…` : key;
  // JSON.stringify escapes control characters, NUL and lone surrogates.
  return `[${JSON.stringify(shown)}]`;
}

function problem(parent: Frame | undefined, segment: Segment, reason: string): JsonProblem {
  const segments = [format(segment, !parent)];
  for (let frame = parent; frame; frame = frame.parent) {
    segments.push(format(frame.segment, !frame.parent));
  }
  segments.reverse();
  return { path: shorten(segments), reason };
}

/** Joins path segments, eliding whole segments from the middle of an overlong path. */
function shorten(segments: readonly string[]): string {
  const whole = segments.join('');
  if (whole.length <= MAX_PATH_LENGTH) return whole;
  const budget = MAX_PATH_LENGTH / 2;
  let head = '';
  let first = 0;
  while (head.length + segments[first].length <= budget) head += segments[first++];
  // The last segment names what was refused, so it is always kept.
  let last = segments.length - 1;
  let tail = segments[last--];
  while (last >= first && tail.length + segments[last].length <= budget) {
    tail = segments[last--] + tail;
  }
  return `${head}…${tail}`;
}
