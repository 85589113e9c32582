/**
 * The path (`.a.b[2]`) of the first place where `actual` does not match `expected` taken as a
 * partial: objects need only the properties `expected` has, arrays match element by element
 * with the same length, anything else must be equal. `''` for the root, null when it matches.
 */
export function firstDifference(actual: unknown, expected: unknown, path = ''): string | null {
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) return path;
    for (let i = 0; i < expected.length; i++) {
      const difference = firstDifference(actual[i], expected[i], `${path}[${i}]`);
      if (difference !== null) return difference;
    }
    return null;
  }
  if (expected !== null && typeof expected === 'object') {
    if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return path;
    for (const [key, value] of Object.entries(expected)) {
      const difference = firstDifference(
        (actual as Record<string, unknown>)[key],
        value,
        `${path}.${key}`,
      );
      if (difference !== null) return difference;
    }
    return null;
  }
  return Object.is(actual, expected) ? null : path;
}
