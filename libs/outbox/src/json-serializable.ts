/** Where a value stops being plain JSON, and why. */
export interface JsonProblem {
  path: string;
  reason: string;
}

/**
 * Finds the first part of `value` that `JSON.stringify` would throw on, drop silently or
 * change: BigInt, functions, symbols, non-finite numbers and cycles. `undefined` object
 * properties are allowed (JSON leaves them out, which is what TypeScript optional fields mean);
 * objects with `toJSON` (Date, Decimal libraries) are checked through what `toJSON` returns.
 */
export function findJsonProblem(value: unknown, path = '$'): JsonProblem | undefined {
  return visit(value, path, new Set<object>());
}

function visit(value: unknown, path: string, ancestors: Set<object>): JsonProblem | undefined {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return undefined;
    case 'number':
      return Number.isFinite(value)
        ? undefined
        : { path, reason: `a non-finite number (${value})` };
    case 'bigint':
      return { path, reason: 'a BigInt' };
    case 'function':
      return { path, reason: 'a function' };
    case 'symbol':
      return { path, reason: 'a symbol' };
    case 'undefined':
      return { path, reason: 'undefined' };
  }
  if (value === null) return undefined;
  const object = value as object;
  if (typeof (object as { toJSON?: unknown }).toJSON === 'function') {
    return visit((object as { toJSON(): unknown }).toJSON(), path, ancestors);
  }
  if (ancestors.has(object)) return { path, reason: 'a circular reference' };
  ancestors.add(object);
  try {
    if (Array.isArray(object)) {
      for (let i = 0; i < object.length; i++) {
        const problem = visit(object[i], `${path}[${i}]`, ancestors);
        if (problem) return problem;
      }
      return undefined;
    }
    for (const [key, child] of Object.entries(object)) {
      if (child === undefined) continue;
      const problem = visit(child, `${path}.${key}`, ancestors);
      if (problem) return problem;
    }
    return undefined;
  } finally {
    ancestors.delete(object);
  }
}
