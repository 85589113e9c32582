/**
 * An optional peer dependency, or `undefined` when the app has not installed it. Any other
 * failure to load it (a broken install, a missing dependency of its own) is thrown: hiding it
 * would switch a feature off without a word.
 */
export function loadOptionalPackage<T>(name: string): T | undefined {
  try {
    // Loaded on demand so that apps without the package never need it; Nest 12's ESM-only
    // packages load through require(esm) (Node 20.19+).
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(name) as T;
  } catch (error) {
    if (isNotInstalled(error, name)) return undefined;
    throw error;
  }
}

/**
 * An optional package that the app has already loaded, or `undefined`: looking never loads it.
 * For packages whose import changes the whole process (nestjs-cls turns AsyncLocalStorage on at
 * import, which taxes every promise the app makes) and that matter only when the app uses them,
 * which it cannot without loading them first.
 */
export function alreadyLoadedPackage<T>(name: string): T | undefined {
  let path: string;
  try {
    path = require.resolve(name);
  } catch (error) {
    if (isNotInstalled(error, name)) return undefined;
    throw error;
  }
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require.cache[path] ? (require(path) as T) : undefined;
}

function isNotInstalled(error: unknown, name: string): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return (
    (code === 'MODULE_NOT_FOUND' || code === 'ERR_MODULE_NOT_FOUND') &&
    typeof message === 'string' &&
    message.includes(`'${name}'`)
  );
}
